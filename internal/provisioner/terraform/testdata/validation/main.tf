# A variable whose validation refuses the value given, next to a sensitive one.
variable "size" {
  type = string
  validation {
    condition     = contains(["s", "m"], var.size)
    error_message = "value must be one of s, m."
  }
}

variable "count_of" {
  type    = number
  default = 1
}

variable "token" {
  type      = string
  sensitive = true
}
