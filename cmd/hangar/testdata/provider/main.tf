# A template that learns about its workspace from Hangar's own provider instead of variables.
terraform {
  required_providers {
    hangar = {
      source = "hangar.dev/hangar/hangar"
    }
  }
}

data "hangar_workspace" "me" {}

resource "terraform_data" "marker" {
  count = data.hangar_workspace.me.start_count
  input = "${data.hangar_workspace.me.name}-${data.hangar_workspace.me.owner}-${data.hangar_workspace.me.transition}"

  provisioner "local-exec" {
    command = "mkdir -p \"$MARKER_DIR\" && touch \"$MARKER_DIR/${self.input}\""
  }

  provisioner "local-exec" {
    when    = destroy
    command = "rm -f \"$MARKER_DIR/${self.input}\""
  }
}
