# The marker template of the end-to-end tests: every resource is a file in $MARKER_DIR, made
# when Terraform creates it and removed when Terraform destroys it, so a test sees exactly which
# resources exist outside Terraform's state. A file "delay" in that directory makes the last
# resource sleep that many seconds (to cancel a build in the middle).
variable "start_count" {
  type = number
}

variable "workspace_name" {
  type = string
}

resource "terraform_data" "marker" {
  count = var.start_count * 3
  input = "${var.workspace_name}-${count.index}"

  provisioner "local-exec" {
    command = "mkdir -p \"$MARKER_DIR\" && touch \"$MARKER_DIR/${self.input}\""
  }

  provisioner "local-exec" {
    when    = destroy
    command = "rm -f \"$MARKER_DIR/${self.input}\""
  }
}

resource "terraform_data" "slow" {
  count      = var.start_count
  depends_on = [terraform_data.marker]

  provisioner "local-exec" {
    command = "sleep \"$(cat \"$MARKER_DIR/delay\" 2>/dev/null || echo 0)\""
  }
}
