terraform {
  required_providers {
    missing = {
      source = "hangar.dev/test/missing"
    }
  }
}

variable "start_count" {
  type = number
}
