# The GPU scripts' steps (sourced by gpu_suite.sh and gpu_kernel_suite.sh), each under its own
# time limit within the script's budget. The sourcing script sets: log (the log file), start
# (its $SECONDS at the start), budget (seconds for the whole run) and reserve (seconds kept for
# the end).
say() { echo "[$((SECONDS - start)) s] $*" | tee -a "$log"; }
left() { echo $((budget - (SECONDS - start))); }

step() {  # step SECONDS NAME COMMAND...: run under a limit (never past the budget's reserve)
    local limit=$1 name=$2
    shift 2
    ((limit > $(left) - reserve)) && limit=$(($(left) - reserve))
    if ((limit < 10)); then
        say "$name: not run (no time left)"
        return
    fi
    say "$name: start (limit ${limit} s)"
    # into the log, not through a pipe: a killed step can leave nothing holding the script up
    timeout --signal=INT --kill-after=5 "$limit" "$@" >>"$log" 2>&1
    say "$name: exit $?"
}
