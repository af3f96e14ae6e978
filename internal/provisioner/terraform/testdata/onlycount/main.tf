variable "start_count" {
  type = number
}

resource "terraform_data" "session" {
  count = var.start_count
  input = "session-${count.index}"
}
