package provider

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
)

// NewInstanceTypesDataSource is dovetail_instance_types.
func NewInstanceTypesDataSource() datasource.DataSource { return &instanceTypes{} }

type instanceTypes struct{ clients *Clients }

type instanceTypesModel struct {
	VCPUsMin         types.Int64   `tfsdk:"vcpus_min"`
	VCPUsMax         types.Int64   `tfsdk:"vcpus_max"`
	MemoryGiBMin     types.Float64 `tfsdk:"memory_gib_min"`
	MemoryGiBMax     types.Float64 `tfsdk:"memory_gib_max"`
	Architectures    types.List    `tfsdk:"architectures"`
	GPUsMin          types.Int64   `tfsdk:"gpus_min"`
	GPUsMax          types.Int64   `tfsdk:"gpus_max"`
	GPUManufacturers types.List    `tfsdk:"gpu_manufacturers"`
	Families         types.List    `tfsdk:"families"`
	CapacityType     types.String  `tfsdk:"capacity_type"`
	MaxPrice         types.Float64 `tfsdk:"max_price"`
	Names            types.List    `tfsdk:"names"`
	InstanceTypes    types.List    `tfsdk:"instance_types"`
}

var instanceTypeAttrTypes = map[string]attr.Type{
	"name": types.StringType, "family": types.StringType, "architecture": types.StringType, "vcpus": types.Int64Type,
	"memory_gib": types.Float64Type, "gpus": types.Int64Type, "gpu_manufacturer": types.StringType,
	"price": types.Float64Type, "zones": types.ListType{ElemType: types.StringType},
}

func (d *instanceTypes) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_instance_types"
}

func (d *instanceTypes) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*Clients); ok {
		d.clients = c
	}
}

func (d *instanceTypes) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	strs := func(desc string, v ...validator.List) schema.ListAttribute {
		return schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: desc, Validators: v}
	}
	resp.Schema = schema.Schema{
		Description: "The region's instance types that match filters, like ec2-instance-selector, cheapest first, with specs and $/hour: " +
			"feed `names` to a NodePool requirement on node.kubernetes.io/instance-type. Prices are on-demand from the built-in table, or the lowest current spot price.",
		Attributes: map[string]schema.Attribute{
			"vcpus_min":      schema.Int64Attribute{Optional: true, Description: "At least this many vCPUs."},
			"vcpus_max":      schema.Int64Attribute{Optional: true, Description: "At most this many vCPUs."},
			"memory_gib_min": schema.Float64Attribute{Optional: true, Description: "At least this much memory, GiB."},
			"memory_gib_max": schema.Float64Attribute{Optional: true, Description: "At most this much memory, GiB."},
			"architectures": strs("Any of these architectures (amd64, arm64).",
				listvalidator.ValueStringsAre(stringvalidator.OneOf(v1.ArchitectureAmd64, v1.ArchitectureArm64))),
			"gpus_min":          schema.Int64Attribute{Optional: true, Description: "At least this many GPUs."},
			"gpus_max":          schema.Int64Attribute{Optional: true, Description: "At most this many GPUs; 0 leaves GPU instances out."},
			"gpu_manufacturers": strs("Any of these GPU makers, lower case (nvidia, amd, habana...)."),
			"families":          strs("Any of these families, such as m7g or c6i."),
			"capacity_type": schema.StringAttribute{Optional: true, Description: "on-demand (default) or spot: spot keeps types offered as spot and prices them at their lowest zone's spot price.",
				Validators: []validator.String{stringvalidator.OneOf(v1.CapacityTypeOnDemand, v1.CapacityTypeSpot)}},
			"max_price": schema.Float64Attribute{Optional: true, Description: "At most this many US dollars an hour."},
			"names":     schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: "Matching instance type names, cheapest first."},
			"instance_types": schema.ListNestedAttribute{Computed: true, Description: "Matching instance types, cheapest first.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":             schema.StringAttribute{Computed: true, Description: "Instance type, e.g. m7i.large."},
					"family":           schema.StringAttribute{Computed: true, Description: "Instance family, e.g. m7i."},
					"architecture":     schema.StringAttribute{Computed: true, Description: "amd64 or arm64."},
					"vcpus":            schema.Int64Attribute{Computed: true, Description: "vCPUs."},
					"memory_gib":       schema.Float64Attribute{Computed: true, Description: "Memory in GiB."},
					"gpus":             schema.Int64Attribute{Computed: true, Description: "GPUs (0 for none)."},
					"gpu_manufacturer": schema.StringAttribute{Computed: true, Description: "GPU manufacturer (nvidia, amd...), empty for none."},
					"price":            schema.Float64Attribute{Computed: true, Description: "US dollars an hour for the capacity type."},
					"zones":            schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: "Zones that offer it."},
				}}},
		},
	}
}

// ValidateConfig catches ranges that can match nothing before any call to AWS.
func (d *instanceTypes) ValidateConfig(ctx context.Context, req datasource.ValidateConfigRequest, resp *datasource.ValidateConfigResponse) {
	var m instanceTypesModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	checkRange := func(minName, maxName string, lo, hi *float64) {
		if lo != nil && hi != nil && *lo > *hi {
			resp.Diagnostics.AddAttributeError(path.Root(minName), "Empty range",
				fmt.Sprintf("%s (%v) is above %s (%v): no instance type can match; lower %s or raise %s.", minName, *lo, maxName, *hi, minName, maxName))
		}
		for name, v := range map[string]*float64{minName: lo, maxName: hi} {
			if v != nil && *v < 0 {
				resp.Diagnostics.AddAttributeError(path.Root(name), "Negative bound", name+" must not be negative.")
			}
		}
	}
	checkRange("vcpus_min", "vcpus_max", int64Ptr(m.VCPUsMin), int64Ptr(m.VCPUsMax))
	checkRange("memory_gib_min", "memory_gib_max", float64Ptr(m.MemoryGiBMin), float64Ptr(m.MemoryGiBMax))
	checkRange("gpus_min", "gpus_max", int64Ptr(m.GPUsMin), int64Ptr(m.GPUsMax))
	if p := float64Ptr(m.MaxPrice); p != nil && *p <= 0 {
		resp.Diagnostics.AddAttributeError(path.Root("max_price"), "Invalid price", "max_price is US dollars an hour and must be positive, such as 0.5.")
	}
}

func int64Ptr(v types.Int64) *float64 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	f := float64(v.ValueInt64())
	return &f
}

func float64Ptr(v types.Float64) *float64 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	f := v.ValueFloat64()
	return &f
}

func (d *instanceTypes) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m instanceTypesModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	requireAWS(d.clients, "data.dovetail_instance_types", &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	api := d.clients.AWS
	file, err := dtaws.NewInstanceTypeProvider(api.EC2, api.Region, dtaws.Settings{}, clock.RealClock{}).List(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot list the region's instance types", err.Error())
		return
	}
	capacityType := m.CapacityType.ValueString()
	if capacityType == "" {
		capacityType = v1.CapacityTypeOnDemand
	}
	var prices *pricing.Provider
	if capacityType == v1.CapacityTypeSpot {
		// The Pricing API is not needed for spot; isolated keeps it from being called.
		prices = pricing.NewProvider(api.EC2, nil, api.Region, true, clock.RealClock{}, logr.Discard())
		if err := prices.UpdateSpot(ctx); err != nil {
			resp.Diagnostics.AddError("Cannot read spot prices", err.Error())
			return
		}
	}
	f := instanceFilter{
		vcpus: bounds(int64Ptr(m.VCPUsMin), int64Ptr(m.VCPUsMax)), memory: bounds(float64Ptr(m.MemoryGiBMin), float64Ptr(m.MemoryGiBMax)),
		gpus: bounds(int64Ptr(m.GPUsMin), int64Ptr(m.GPUsMax)), maxPrice: float64Ptr(m.MaxPrice),
		archs: sets.New(listStrings(ctx, m.Architectures)...), gpuMakers: sets.New(listStrings(ctx, m.GPUManufacturers)...),
		families: sets.New(listStrings(ctx, m.Families)...),
	}
	matches := f.apply(file.InstanceTypes, capacityType, prices)
	var names, objects []attr.Value
	for _, it := range matches {
		names = append(names, types.StringValue(it.name))
		var zones []attr.Value
		for _, z := range it.zones {
			zones = append(zones, types.StringValue(z))
		}
		objects = append(objects, types.ObjectValueMust(instanceTypeAttrTypes, map[string]attr.Value{
			"name": types.StringValue(it.name), "family": types.StringValue(it.family), "architecture": types.StringValue(it.arch),
			"vcpus": types.Int64Value(it.vcpus), "memory_gib": types.Float64Value(it.memoryGiB), "gpus": types.Int64Value(it.gpus),
			"gpu_manufacturer": types.StringValue(it.gpuMaker), "price": types.Float64Value(it.price),
			"zones": types.ListValueMust(types.StringType, zones),
		}))
	}
	m.Names = types.ListValueMust(types.StringType, names)
	m.InstanceTypes = types.ListValueMust(types.ObjectType{AttrTypes: instanceTypeAttrTypes}, objects)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type span struct{ lo, hi float64 }

func bounds(lo, hi *float64) span {
	s := span{0, math.Inf(1)}
	if lo != nil {
		s.lo = *lo
	}
	if hi != nil {
		s.hi = *hi
	}
	return s
}

func (s span) has(v float64) bool { return v >= s.lo && v <= s.hi }

type instanceFilter struct {
	vcpus, memory, gpus        span
	maxPrice                   *float64
	archs, gpuMakers, families sets.Set[string]
}

type instanceMatch struct {
	name, family, arch, gpuMaker string
	vcpus, gpus                  int64
	memoryGiB, price             float64
	zones                        []string
}

// apply keeps the entries that pass every filter, cheapest first.
func (f instanceFilter) apply(entries []catalog.Entry, capacityType string, spot *pricing.Provider) []instanceMatch {
	var out []instanceMatch
	for _, e := range entries {
		vcpus, _ := strconv.ParseInt(e.Labels[v1.LabelInstanceCPU], 10, 64)
		memMiB, _ := strconv.ParseFloat(e.Labels[v1.LabelInstanceMemory], 64)
		gpus, _ := strconv.ParseInt(e.Labels[v1.LabelInstanceGPUCount], 10, 64)
		m := instanceMatch{name: e.Name, family: e.Labels[v1.LabelInstanceFamily], arch: e.Architecture, gpuMaker: e.Labels[v1.LabelInstanceGPUMfr],
			vcpus: vcpus, gpus: gpus, memoryGiB: memMiB / 1024, price: math.Inf(1)}
		for _, o := range e.Offerings {
			if o.CapacityType != capacityType {
				continue
			}
			price := o.Price
			if spot != nil {
				p, ok := spot.Spot(e.Name, o.Zone)
				if !ok {
					continue
				}
				price = p
			}
			m.zones = append(m.zones, o.Zone)
			m.price = math.Min(m.price, price)
		}
		switch {
		case len(m.zones) == 0,
			!f.vcpus.has(float64(vcpus)), !f.memory.has(m.memoryGiB), !f.gpus.has(float64(gpus)),
			f.archs.Len() > 0 && !f.archs.Has(m.arch),
			f.gpuMakers.Len() > 0 && !f.gpuMakers.Has(m.gpuMaker),
			f.families.Len() > 0 && !f.families.Has(m.family),
			f.maxPrice != nil && m.price > *f.maxPrice:
			continue
		}
		sort.Strings(m.zones)
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].price != out[j].price {
			return out[i].price < out[j].price
		}
		return out[i].name < out[j].name
	})
	return out
}

func listStrings(ctx context.Context, l types.List) []string {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var out []string
	_ = l.ElementsAs(ctx, &out, false)
	return out
}
