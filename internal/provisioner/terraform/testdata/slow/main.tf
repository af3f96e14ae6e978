# Three quick markers, then one resource whose creation sleeps 30 s (exec, so that terraform's
# interrupt of the provisioner kills the sleep itself).
variable "marker_dir" {
  type = string
}

resource "terraform_data" "quick" {
  count = 3
  input = "${var.marker_dir}/quick-${count.index}"

  provisioner "local-exec" {
    command = "touch '${self.input}'"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "rm -f '${self.input}'"
  }
}

resource "terraform_data" "slow" {
  depends_on = [terraform_data.quick]
  input      = "${var.marker_dir}/slow"

  provisioner "local-exec" {
    command = "touch '${self.input}'; echo slow-started; exec sleep 30"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "rm -f '${self.input}'"
  }
}
