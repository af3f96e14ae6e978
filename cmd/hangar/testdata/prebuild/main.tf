# A template that leaves its user's part to the claim: the machine is set up when the prebuilt
# workspace is created (is_prebuild), the user's part when it is claimed (is_prebuild_claim), both
# read from Hangar's own provider. Marker files show what ran.
terraform {
  required_providers {
    hangar = {
      source = "hangar.dev/hangar/hangar"
    }
  }
}

data "hangar_workspace" "me" {}

resource "terraform_data" "machine" {
  count = data.hangar_workspace.me.start_count
  input = data.hangar_workspace.me.is_prebuild

  provisioner "local-exec" {
    command = "mkdir -p \"$MARKER_DIR\" && touch \"$MARKER_DIR/machine-is-prebuild-${self.input}\""
  }
}

resource "terraform_data" "user" {
  count = data.hangar_workspace.me.is_prebuild_claim ? 1 : 0
  input = data.hangar_workspace.me.owner

  provisioner "local-exec" {
    command = "touch \"$MARKER_DIR/claimed-by-${self.input}\""
  }
}
