package operator

import "github.com/dovetail-sh/dovetail/controller/operator/settings"

// Options are the controller's settings; they live in package settings, which
// predictions read without linking the controllers.
type Options = settings.Options

// Endpoints are per-service AWS endpoint overrides.
type Endpoints = settings.Endpoints

// AWSServices are the services an endpoint can be given for.
var AWSServices = settings.AWSServices

// LogStreams opens the log destinations a --log-output-paths value names.
var LogStreams = settings.LogStreams
