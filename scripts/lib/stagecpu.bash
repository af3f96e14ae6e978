# Sourced by .ci/run and scripts/test: the CPU seconds (user + system) of the finished children of
# this shell, which is what a stage costs whatever else runs on the machine. `times` must run in
# the shell itself (a $(...) subshell would report its own children), hence the file.
# Processes a stage leaves running, or that were reparented away from it, are not counted.
stagecpu_file="$(mktemp)"
trap 'rm -f "$stagecpu_file"' EXIT
# cpu_cs sets CPU_CS to the children's user + system time so far, in hundredths of a second. Call
# it as a command of this shell, never in $(...).
cpu_cs() {
  times >"$stagecpu_file"
  # The second line is the children's: "1m2.345s 0m6.789s".
  CPU_CS=$(sed -n 2p "$stagecpu_file" | awk '{
    t = 0
    for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
    printf "%d\n", t * 100 }')
}
# cpu_fmt CS prints CS hundredths of a second as seconds, "123.4".
cpu_fmt() { printf '%d.%d' $(( $1 / 100 )) $(( ($1 % 100) / 10 )); }
# loadavg prints the 1-minute load average.
loadavg() { cut -d' ' -f1 /proc/loadavg; }
