# The template of the cancel-and-kill test: six resources, each a marker file in
# $MARKER_DIR that Terraform makes when it creates the resource and removes when it destroys
# it. Creations finish at different times (0.1 s to 0.6 s) so that an interrupt can land between
# any two. The marker is written last: a creation interrupted before it leaves no file (Terraform
# then records the resource as tainted, and does not run destroy provisioners for tainted
# resources); one interrupted after it has recorded the resource.
variable "start_count" {
  type = number
}

variable "workspace_name" {
  type = string
}

resource "terraform_data" "marker" {
  count = var.start_count * 6
  input = "${var.workspace_name}-${count.index}"

  provisioner "local-exec" {
    command = "sleep 0.${count.index + 1} && mkdir -p \"$MARKER_DIR\" && touch \"$MARKER_DIR/${self.input}\""
  }

  provisioner "local-exec" {
    when    = destroy
    command = "sleep 0.05 && rm -f \"$MARKER_DIR/${self.input}\""
  }
}
