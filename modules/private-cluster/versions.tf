terraform {
  required_version = ">= 1.5"
  required_providers {
    dovetail = {
      source  = "dovetail-sh/dovetail"
      version = ">= 0.1.0"
    }
  }
}
