# The template of BenchmarkTerraformStateSize: one resource whose state the benchmark inflates to
# the size it measures (a long "input", and so "output", pushed with PUT .../state). ignore_changes
# keeps Terraform from putting the short input back, so every build, start or stop, is a no-op apply
# that reads and writes the whole state, and leaves it as large as it was.
resource "terraform_data" "blob" {
  input = "seed"

  lifecycle {
    ignore_changes = all
  }
}
