#!/bin/sh
# The browser's keeper: MiniWoB starts it as its ChromeDriver (MINIWOB_CHROMEDRIVER); it runs the real one
# ($VERL_CUA_CHROMEDRIVER) and ties the browser to its owner. It leads a process group of its own (setsid, same pid,
# so selenium's service.process.pid is the keeper) and SIGKILLs that group, chromedriver and every browser process,
# when its stdin (a pipe only the owner writes to) reaches EOF: the owner closed it or died, SIGKILL included;
# when chromedriver exits for any reason; or on SIGTERM/SIGINT/SIGHUP (selenium's quit).
# Chromium's crash handlers leave the group (they double-fork and setsid): they carry this keeper's
# VERL_CUA_BROWSER_KEEPER=<pid>:<uuid> in their environment and are killed by that exact mark, nothing else.

leads_group() {
    read -r stat <"/proc/$$/stat" || return 1
    stat=${stat##*) }
    set -- $stat
    [ "$3" = "$$" ]
}

case "${VERL_CUA_BROWSER_KEEPER:-}" in
"$$":*) ;;
*)
    read -r uuid </proc/sys/kernel/random/uuid || exit 97
    VERL_CUA_BROWSER_KEEPER="$$:$uuid"
    export VERL_CUA_BROWSER_KEEPER
    if leads_group; then exec "$0" "$@"; fi
    exec setsid "$0" "$@" # setsid(1) keeps the pid of a process that is no group leader yet
    ;;
esac
[ -n "${VERL_CUA_CHROMEDRIVER:-}" ] || { echo "browser keeper: VERL_CUA_CHROMEDRIVER names no chromedriver" >&2; exit 97; }
if ! leads_group; then
    echo "browser keeper: pid $$ does not lead its own process group; not starting chromedriver" >&2
    exit 97
fi

kill_browser() {
    trap '' TERM INT HUP
    for environ in $(grep -lxzF "VERL_CUA_BROWSER_KEEPER=$VERL_CUA_BROWSER_KEEPER" /proc/[0-9]*/environ 2>/dev/null); do
        pid=${environ#/proc/}
        pid=${pid%/environ}
        read -r stat 2>/dev/null <"/proc/$pid/stat" || continue
        stat=${stat##*) }
        set -- $stat
        [ "$3" = "$$" ] || kill -9 "$pid" 2>/dev/null # the escaped crash handlers; the group goes next
    done
    kill -9 -$$
}

trap kill_browser TERM INT HUP
exec 3<&0 0</dev/null
"$VERL_CUA_CHROMEDRIVER" "$@" 3<&- &
driver=$!
{ cat >/dev/null 3<&-; kill_browser; } <&3 &
exec 3<&-
wait "$driver"
kill_browser
