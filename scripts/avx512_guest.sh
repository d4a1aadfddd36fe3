#!/usr/bin/env bash
# avx512_guest.sh - run a host-built x86-64 Linux program on an *emulated*
# AVX-512 CPU (Bochs 2.7, cpu model corei7_skylake_x: AVX-512 F/CD/BW/DQ/VL).
#
# Why: this machine's CPU is AVX2-only, so oneDNN 2.6 refuses bf16 primitives
# (dnnl_unimplemented).  oneDNN implements bf16 on any avx512_core CPU, so
# running the program under Bochs' Skylake-X model exercises those code paths.
# (QEMU 7.2 TCG and valgrind do not emulate AVX-512.)
#
# Usage:
#   scripts/avx512_guest.sh [options] -- PROGRAM [ARGS...]
# Options:
#   --timeout S              kill the guest after S seconds of wall time (default 1800); exit 124
#   --file HOST[:GUEST]      copy a file or directory into the guest (GUEST defaults to the
#                            absolute host path); ELF files also get their ldd libraries. Repeatable.
#   --env NAME=VALUE         set an environment variable for PROGRAM. Repeatable.
#   --cwd GUESTDIR           working directory for PROGRAM (default: PROGRAM's directory)
#   --mem MB                 guest RAM in MB (default 2048)
#   --ips N                  instructions per *guest* second (Bochs cpu ips=; the guest TSC is
#                            declared to run at that rate). Default 60000000, about what Bochs
#                            manages here on scalar code, so guest clocks roughly track wall time
#   --verbose | -v           show kernel console + progress/timing lines (on stderr)
#   --append "ARGS"          extra kernel command-line arguments
#   --gzip                   gzip the initramfs (smaller ISO, but gunzip in the guest is slow)
#   --keep                   keep the per-run work dir (ISO, bochsrc, serial log, bochs log)
#
# PROGRAM is looked up in PATH like a shell would and copied into the guest at
# its absolute host path, together with every library `ldd` lists (the dynamic
# loader included) at the same paths.  The guest is a Debian cloud kernel with
# a busybox-static initramfs booted from an isolinux CD; /init mounts
# proc/sys/devtmpfs/tmpfs, runs the command (stdin = /dev/null, stdout and
# stderr = serial console), prints "GUEST_RC=<n>" and powers off.
#
# Output: PROGRAM's stdout+stderr (merged, via the guest serial port) on this
# script's stdout; exit status = PROGRAM's exit status, 124 on timeout, 125 on
# an infrastructure failure (boot failure, Bochs died; the logs are printed).
#
# Example (oneDNN bf16 paths of nvcnn, refused on this AVX2-only host):
#   scripts/avx512_guest.sh -- ./nvcnn --model=lenet --precision=bf16 --batch_size=4 --num_batches=3
#
# Costs and limits measured on this 2-core VM (Debian Bochs 2.7):
#  * boot to /init ~14 s for a small program; every MB of initramfs adds ~0.1 s
#    (BIOS CD reads ~13 MB/s + unpacking): nvcnn with its ~300 MB of libraries
#    (NCCL alone is 218 MB) takes ~40-50 s.
#  * speed: ~60 M instructions/s on scalar code, ~8 M/s on 512-bit FMAs, so
#    compute is ~100-1000x slower than native; one emulated CPU (Bochs runs
#    all CPUs in one host thread, more would not help), so OpenMP gets 1 thread.
#  * memory: Bochs' own allocation ('host=') is capped at 2048 MB; a bigger
#    --mem still works, Bochs pages the excess to a file (~2x slower there):
#    4096 -> 3 GB usable (PCI hole), 8192 -> 7 GB; 2.4 GB touched was tested.
#    Files live in the RAM-backed rootfs (resized to 90% of RAM).
#  * memset/memcpy: Bochs runs 'rep stosb' at ~25 MB/s, so /init sets
#    GLIBC_TUNABLES to keep glibc on vector loops (~500 MB/s).
#  * guest clocks count emulated instructions (--ips per second), not wall time.
#
# Needs root for apt-get only when something is missing.  The kernel is cached
# under ${XDG_CACHE_HOME:-~/.cache}/nvcnn-avx512-guest (never in the repo); the
# initramfs/ISO is rebuilt per run in a temporary dir there (see --keep).
set -euo pipefail

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/nvcnn-avx512-guest"
TIMEOUT=1800
MEM=2048
IPS=60000000
VERBOSE=0
KEEP=0
COMPRESS=none
APPEND=""
CWD=""
FILES=()
ENVS=()

die() { echo "avx512_guest: $*" >&2; exit 125; }
say() { if [ "$VERBOSE" = 1 ]; then echo "avx512_guest: $*" >&2; fi; }

while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) TIMEOUT="$2"; shift 2 ;;
    --file) FILES+=("$2"); shift 2 ;;
    --env) ENVS+=("$2"); shift 2 ;;
    --cwd) CWD="$2"; shift 2 ;;
    --mem) MEM="$2"; shift 2 ;;
    --ips) IPS="$2"; shift 2 ;;
    -v|--verbose) VERBOSE=1; shift ;;
    --keep) KEEP=1; shift ;;
    --gzip) COMPRESS=gzip; shift ;;
    --append) APPEND="$APPEND $2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die "no PROGRAM given (usage: $0 [options] -- PROGRAM ARGS...)"
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "--timeout wants whole seconds"
[[ "$MEM" =~ ^[0-9]+$ ]] || die "--mem wants megabytes"

# ---------------------------------------------------------------- 1. tools --
# Debian packages only; installed only when a needed file is missing.
mkdir -p "$CACHE"
need_pkgs=()
[ -x /usr/bin/bochs ] || need_pkgs+=(bochs)
# Debian builds no 'nogui' display into Bochs; the 'term' display (own package) stands in
[ -e /usr/lib/x86_64-linux-gnu/bochs/plugins/libbx_term_gui.so.0 ] || need_pkgs+=(bochs-term)
command -v script >/dev/null && command -v setsid >/dev/null || need_pkgs+=(bsdutils util-linux)
[ -f /usr/share/bochs/BIOS-bochs-latest ] || need_pkgs+=(bochsbios)
[ -f /usr/share/vgabios/vgabios.bin ] || need_pkgs+=(vgabios)
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx poweroff \
  && ! ldd /bin/busybox >/dev/null 2>&1 || need_pkgs+=(busybox-static)
[ -f /usr/lib/ISOLINUX/isolinux.bin ] || need_pkgs+=(isolinux)
[ -f /usr/lib/syslinux/modules/bios/ldlinux.c32 ] || need_pkgs+=(syslinux-common)
command -v xorriso >/dev/null || need_pkgs+=(xorriso)
command -v cpio >/dev/null || need_pkgs+=(cpio)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing ${need_pkgs[*]}"
  [ "$(id -u)" = 0 ] || die "missing packages (${need_pkgs[*]}) and not root"
  { apt-get install -y -q "${need_pkgs[@]}" || { apt-get update -q && apt-get install -y -q "${need_pkgs[@]}"; }; } \
    >"$CACHE/apt.log" 2>&1 || { cat "$CACHE/apt.log" >&2; die "apt-get install failed"; }
fi

# --------------------------------------------------------------- 2. kernel --
# The Debian *cloud* flavour: same 6.1 kernel, far fewer drivers -> faster boot
# under emulation; it has 8250 serial console, devtmpfs, ACPI and initramfs
# support built in, which is all an initramfs-only guest needs.
KERNEL="$CACHE/vmlinuz"
if [ ! -s "$KERNEL" ]; then
  kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
  if [ -z "$kpkg" ]; then apt-get update -q >/dev/null 2>&1 || true
    kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}'); fi
  [ -n "$kpkg" ] || die "cannot resolve linux-image-cloud-amd64 (apt-get update?)"
  say "downloading kernel package $kpkg"
  kd="$CACHE/kernel"; rm -rf "$kd"; mkdir -p "$kd"
  # apt-get download runs as _apt when it can; a root-owned dir only warns.
  (cd "$kd" && apt-get download -q "$kpkg" >download.log 2>&1) || { cat "$kd/download.log" >&2; die "apt-get download $kpkg failed"; }
  dpkg-deb -x "$kd"/*.deb "$kd/x"
  cp "$kd"/x/boot/vmlinuz-* "$KERNEL.tmp" && mv "$KERNEL.tmp" "$KERNEL"
  echo "$kpkg" >"$CACHE/vmlinuz.pkg"
  rm -rf "$kd"
fi

# ------------------------------------------------------------ 3. initramfs --
PROG="$1"; shift
if [[ "$PROG" != */* ]]; then PROG=$(command -v -- "$PROG") || die "program $PROG not found in PATH"; fi
[ -f "$PROG" ] && [ -x "$PROG" ] || die "$PROG is not an executable file"
PROG=$(realpath -- "$PROG")
[ -n "$CWD" ] || CWD=$(dirname -- "$PROG")

WORK=$(mktemp -d "$CACHE/run.XXXXXX")
BOCHS_PID=""
cleanup() {
  # BOCHS_PID is 'script'; bochs.pid holds Bochs' own pid (it runs in the pty's session)
  local p
  for p in $(cat "$WORK/bochs.pid" 2>/dev/null) $BOCHS_PID; do
    if kill -0 "$p" 2>/dev/null; then kill "$p" 2>/dev/null || true; sleep 0.3; kill -9 "$p" 2>/dev/null || true; fi
  done
  if [ "$KEEP" = 1 ]; then echo "avx512_guest: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ROOT="$WORK/root"
mkdir -p "$ROOT"
# Mirror the host's merged-/usr symlinks (/lib -> usr/lib, ...) so ldd paths,
# the loader's built-in search dirs and RUNPATHs resolve exactly as on the host.
for d in bin sbin lib lib32 lib64 libx32; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$ROOT/$d"; mkdir -p "$ROOT/$(readlink -f "/$d" | sed 's,^/,,')"
  elif [ -d "/$d" ]; then mkdir -p "$ROOT/$d"; fi
done
mkdir -p "$ROOT"/{usr/bin,usr/sbin,proc,sys,dev,tmp,run,etc,root,avx512_guest}

# copy HOSTPATH to GUESTPATH inside the initramfs (files or directories, following symlinks)
put() {
  local src="$1" dst="$2"
  mkdir -p "$ROOT$(dirname -- "$dst")"
  if [ -d "$src" ]; then mkdir -p "$ROOT$dst"; cp -aL -- "$src/." "$ROOT$dst/"
  else cp -L -- "$src" "$ROOT$dst"; fi
}
# copy the shared libraries of an ELF file (ldd; loader at its absolute path)
declare -A SEEN=()
put_libs() {
  local f="$1" lib
  head -c4 -- "$f" 2>/dev/null | grep -q 'ELF' || return 0
  while read -r lib; do
    [ -n "$lib" ] && [ -z "${SEEN[$lib]:-}" ] || continue
    SEEN[$lib]=1; put "$lib" "$lib"
  done < <(ldd -- "$f" 2>/dev/null | awk '/=> \//{print $3} /^[ \t]*\/[^ ]+ \(0x/{print $1}' || true)
  if ldd -- "$f" 2>&1 | grep -q 'not found'; then
    echo "avx512_guest: warning: unresolved libraries for $f:" >&2; ldd -- "$f" | grep 'not found' >&2
  fi
}

put /bin/busybox /bin/busybox
put "$PROG" "$PROG"; put_libs "$PROG"
for spec in ${FILES[@]+"${FILES[@]}"}; do
  src="${spec%%:*}"; dst="${spec#*:}"; [ "$spec" != "$src" ] || dst=""
  [ -e "$src" ] || die "--file $src does not exist"
  [ -n "$dst" ] || dst=$(realpath -- "$src")
  [[ "$dst" == /* ]] || die "--file guest path must be absolute: $dst"
  put "$src" "$dst"
  if [ -d "$src" ]; then while IFS= read -r -d '' f; do put_libs "$f"; done < <(find "$src" -type f -perm -u+x -print0)
  else put_libs "$src"; fi
done

# The command and environment travel as files; each word is single-quoted
# (with ' written as '\'') so any argument survives unchanged.
q() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }
{ for a in "$PROG" "$@"; do q "$a"; printf ' '; done; echo; } >"$ROOT/avx512_guest/cmd"
{ echo "cd $(q "$CWD") || exit 126"
  for e in ${ENVS[@]+"${ENVS[@]}"}; do
    [[ "$e" == *=* ]] || die "--env wants NAME=VALUE: $e"
    echo "export ${e%%=*}=$(q "${e#*=}")"
  done; } >"$ROOT/avx512_guest/env"
NONCE=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
echo "$NONCE" >"$ROOT/avx512_guest/nonce"
echo "root:x:0:0:root:/root:/bin/sh" >"$ROOT/etc/passwd"
echo "root:x:0:" >"$ROOT/etc/group"
printf '127.0.0.1 localhost avx512-guest\n::1 localhost\n' >"$ROOT/etc/hosts"

cat >"$ROOT/init" <<'EOF'
#!/bin/busybox sh
# PID 1 of the AVX-512 guest (generated by scripts/avx512_guest.sh)
/bin/busybox --install -s
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root TMPDIR=/tmp
# Bochs executes 'rep stosb' a byte per step (~25 MB/s): keep glibc's memset and
# memcpy on their vector loops (20x faster here). --env GLIBC_TUNABLES=... overrides.
export GLIBC_TUNABLES=glibc.cpu.x86_rep_stosb_threshold=0x7fffffffffffffff:glibc.cpu.x86_rep_movsb_threshold=0x7fffffffffffffff
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm && mount -t tmpfs -o mode=1777 tmpfs /dev/shm
chmod 1777 /tmp        # rootfs is already RAM-backed (and may hold files under /tmp)
mount -o remount,size=90% / 2>/dev/null   # rootfs is a tmpfs capped at 50% of RAM by default
ln -sf /proc/self/fd /dev/fd 2>/dev/null
hostname avx512-guest
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up   # loopback only (MPI singletons use it)
echo 1 >/proc/sys/kernel/printk   # keep kernel chatter off the console from here on
N=$(cat /avx512_guest/nonce)
echo "GUEST_INIT uptime=$(cut -d' ' -f1 /proc/uptime) $N"
(
  . /avx512_guest/env
  echo "GUEST_START $N"
  eval "exec $(cat /avx512_guest/cmd)" </dev/null
) >/dev/console 2>&1
rc=$?
echo ""
echo "GUEST_RC=$rc uptime=$(cut -d' ' -f1 /proc/uptime) $N"
sync
poweroff -f
sleep 5
echo o >/proc/sysrq-trigger
EOF
chmod +x "$ROOT/init"

# ----------------------------------------------------------------- 4. ISO --
ISO="$WORK/iso"; mkdir -p "$ISO/isolinux"
(cd "$ROOT" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet) >"$ISO/initrd.gz"
if [ "$COMPRESS" = gzip ]; then gzip -1 -c "$ISO/initrd.gz" >"$ISO/initrd.tmp" && mv "$ISO/initrd.tmp" "$ISO/initrd.gz"; fi
cp "$KERNEL" "$ISO/vmlinuz"
cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$ISO/isolinux/"
QUIET="quiet loglevel=3"; [ "$VERBOSE" = 1 ] && QUIET="loglevel=6"
# console on the serial port; no KASLR / mitigations / watchdogs; one CPU;
# lpj skips the delay-loop calibration; tsc=reliable skips clocksource checks.
# tsc_early_khz: Bochs' TSC advances once per emulated instruction (ips per
# guest second), but the kernel would take the model's 3.5 GHz and run the
# guest clock ~50x slow; declaring the real rate keeps every guest clock
# consistent with Bochs' virtual time.
# clearcpuid=xsaves,xsavec: Bochs 2.7 reports the *standard* XSAVE area size (2688)
# in CPUID(0xD,1).EBX where the compacted size (2432) belongs; with XSAVES the
# kernel (which uses compacted XSAVES, or XSAVEC since 5.19) then finds "XSAVE
# consistency problem" and disables XSAVE entirely
# (no AVX/AVX-512 for user space).  Without both it uses standard-format XSAVEOPT.
# clearcpuid=aperfmperf: Bochs has no APERF/MPERF MSRs; the kernel would read
# them every timer tick and Bochs would log each read as an error.
CMDLINE="console=ttyS0,115200 rdinit=/init $QUIET clearcpuid=xsaves,xsavec,aperfmperf mitigations=off nokaslr nosmp maxcpus=1 lpj=1000000 tsc=reliable no_timer_check nowatchdog nmi_watchdog=0 random.trust_cpu=on cryptomgr.notests panic=-1 tsc_early_khz=$((IPS / 1000)) initcall_blacklist=trace_eval_init,init_kprobe_trace$APPEND"
cat >"$ISO/isolinux/isolinux.cfg" <<EOF
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL /vmlinuz
  INITRD /initrd.gz
  APPEND $CMDLINE
EOF
xorriso -as mkisofs -quiet -o "$WORK/boot.iso" -b isolinux/isolinux.bin -c isolinux/boot.cat \
  -no-emul-boot -boot-load-size 4 -boot-info-table -R "$ISO" >"$WORK/xorriso.log" 2>&1 \
  || { cat "$WORK/xorriso.log" >&2; die "xorriso failed"; }
say "initramfs $(du -h "$ISO/initrd.gz" | cut -f1), iso $(du -h "$WORK/boot.iso" | cut -f1)"

# ---------------------------------------------------------------- 5. Bochs --
SERIAL="$WORK/serial.out"; BLOG="$WORK/bochs.log"; : >"$SERIAL"
cat >"$WORK/bochsrc" <<EOF
# generated by scripts/avx512_guest.sh
plugin_ctrl: unmapped=true, biosdev=false, speaker=false, extfpuirq=false, parallel=false, gameport=false, iodebug=false
config_interface: textconfig
display_library: term
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
cpu: model=corei7_skylake_x, count=1, ips=$IPS, reset_on_triple_fault=0, ignore_bad_msrs=1
memory: guest=$MEM, host=$(( MEM < 2048 ? MEM : 2048 ))
pci: enabled=1, chipset=i440fx
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=cdrom, path="$WORK/boot.iso", status=inserted
boot: cdrom
floppy_bootsig_check: disabled=1
clock: sync=none, time0=local
com1: enabled=1, mode=file, dev="$SERIAL"
mouse: enabled=0
log: $BLOG
logprefix: %t%e%d
panic: action=fatal
error: action=report
info: action=ignore
debug: action=ignore
EOF

T0=$(date +%s.%N)
say "starting Bochs (corei7_skylake_x, ${MEM} MB, ips=$IPS)"
# Debian's Bochs has no 'nogui' display and is built with the debugger, which
# stops at a prompt before the first instruction: '-rc' feeds it 'continue'.
# The 'term' display needs a terminal: 'script' gives Bochs a private pty (so
# it never touches ours) and setsid detaches it from our controlling tty.
printf 'continue\nquit\n' >"$WORK/dbg.rc"
setsid script -qfec "echo \$\$ >'$WORK/bochs.pid'; TERM=vt100 exec bochs -q -f '$WORK/bochsrc' -rc '$WORK/dbg.rc'" /dev/null \
  </dev/null >"$WORK/bochs.stdout" 2>&1 &
BOCHS_PID=$!

fail() {  # fail MESSAGE [EXIT_CODE]
  echo "avx512_guest: $1" >&2
  echo "---- serial console (last 60 lines) ----" >&2; tail -n 60 "$SERIAL" | tr -d '\r' >&2
  echo "---- bochs stdout (last 40 lines) ----" >&2; tail -n 40 "$WORK/bochs.stdout" >&2 || true
  echo "---- bochs log (last 40 lines) ----" >&2; tail -n 40 "$BLOG" >&2 || true
  exit "${2:-125}"
}

# Stream the serial console.  Lines between GUEST_START and GUEST_RC (the
# program's output) go to stdout; everything else only with --verbose.
printed=0; started=0; rc=""; t_init=""; blanks=0; panic=""
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}'; }
pump() {  # print complete lines [printed+1 .. n]
  local n; n=$(wc -l <"$SERIAL")
  [ "$n" -gt "$printed" ] || return 0
  while IFS= read -r line; do
    line=${line%$'\r'}
    case "$line" in
      "GUEST_INIT "*" $NONCE") t_init=$(date +%s.%N); say "reached /init after $(since "$T0") s (guest ${line#GUEST_INIT })" ;;
      "GUEST_START $NONCE") started=1 ;;
      "GUEST_RC="*" $NONCE") rc=${line#GUEST_RC=}; rc=${rc%% *}; started=0
        # init echoes a newline before the marker (ends an unterminated last line): drop it
        [ "$blanks" -gt 0 ] && blanks=$((blanks - 1)); for ((; blanks > 0; blanks--)); do echo; done
        say "program finished: rc=$rc, $(since "${t_init:-$T0}") s after /init (${line% *})" ;;
      *"Kernel panic - not syncing"*) panic=$line; printf '%s\n' "$line" >&2 ;;
      "") if [ "$started" = 1 ]; then blanks=$((blanks + 1)); fi ;;
      *) if [ "$started" = 1 ]; then for ((; blanks > 0; blanks--)); do echo; done; printf '%s\n' "$line"; elif [ "$VERBOSE" = 1 ]; then printf '[+%s s] %s\n' "$(since "$T0")" "$line" >&2; fi ;;
    esac
  done < <(sed -n "$((printed + 1)),${n}p" "$SERIAL")
  printed=$n
}

deadline=$(( $(date +%s) + TIMEOUT ))
while :; do
  pump
  # the blank echo before GUEST_RC ends any unterminated program line; drop it
  if [ -n "$rc" ]; then break; fi
  if [ -n "$panic" ]; then sleep 1; pump; fail "guest kernel panic"; fi
  if ! kill -0 "$BOCHS_PID" 2>/dev/null; then
    pump; [ -n "$rc" ] && break
    fail "Bochs exited before the program finished"
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    pump; fail "timeout after ${TIMEOUT} s; killing Bochs" 124
  fi
  sleep 0.5
done
# give ACPI poweroff a moment to end Bochs by itself, then make sure it is gone
for _ in $(seq 20); do kill -0 "$BOCHS_PID" 2>/dev/null || break; sleep 0.25; done
say "total wall time $(since "$T0") s"
exit "$rc"
