# A template whose "machine" is a local process: the end-to-end test of hangar_agent. Starting the
# workspace runs the agent's init script in the background (the helper connects out to the server:
# the machine needs no inbound port) in $MACHINE_DIR/<name>, with a home directory holding a file
# the module wrote; stopping it kills the helper.
terraform {
  required_providers {
    hangar = {
      source = "hangar.dev/hangar/hangar"
    }
  }
}

data "hangar_workspace" "me" {}

resource "hangar_agent" "main" {}

resource "terraform_data" "machine" {
  count = data.hangar_workspace.me.start_count
  input = data.hangar_workspace.me.name

  provisioner "local-exec" {
    command = <<-EOT
      set -e
      dir="$MACHINE_DIR/${self.input}"
      mkdir -p "$dir/home"
      echo "the machine of ${self.input}, made by the module" > "$dir/home/machine.txt"
      cat > "$dir/init.sh" <<'HANGAR_INIT'
      ${hangar_agent.main.init_script}
      HANGAR_INIT
      cd "$dir/home"
      HOME="$dir/home" setsid nohup sh "$dir/init.sh" --state-dir "$dir/state" >"$dir/helper.log" 2>&1 </dev/null &
      echo $! > "$dir/helper.pid"
    EOT
  }

  provisioner "local-exec" {
    when    = destroy
    command = "dir=\"$MACHINE_DIR/${self.input}\"; kill \"$(cat \"$dir/helper.pid\")\" 2>/dev/null || true; rm -f \"$dir/helper.pid\""
  }
}
