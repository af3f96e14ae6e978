# The author's lock file, recorded against another Hangar executable: its checksum does not match
# the provider the runner offers, which replaces the entry.
provider "hangar.dev/hangar/hangar" {
  version = "0.1.0"
  hashes = [
    "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
  ]
}
