variable "start_count" {
  type = number
}

resource "terraform_data" "broken" {
  input = "unterminated
}
