# A module that uses Hangar's own provider, installed from the runner's filesystem mirror.
terraform {
  required_providers {
    hangar = {
      source = "hangar.dev/hangar/hangar"
    }
  }
}

provider "hangar" {}
