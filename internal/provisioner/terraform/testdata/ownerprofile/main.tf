# A module that reads its owner's profile from Hangar's data source, as a template gives a
# machine its git identity and dotfiles.
terraform {
  required_providers {
    hangar = {
      source = "hangar.dev/hangar/hangar"
    }
  }
}

provider "hangar" {}

data "hangar_workspace" "me" {}

output "git" {
  value = "${data.hangar_workspace.me.owner_full_name} <${data.hangar_workspace.me.owner_email}>"
}

output "dotfiles" {
  value = data.hangar_workspace.me.owner_dotfiles_repo
}
