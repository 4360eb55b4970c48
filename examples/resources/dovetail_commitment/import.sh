# A Commitment is imported by its name.
terraform import dovetail_commitment.ri_m5 ri-m5
