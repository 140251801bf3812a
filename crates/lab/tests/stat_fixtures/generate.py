#!/usr/bin/env python3
"""Regenerate the expected outputs of `linerate stat` (tests/stat_ministat.rs).

Two reference programs:

* ORACLE (env MINISTAT_FREEBSD, required): FreeBSD's current usr.bin/ministat/ministat.c
  (the version with -A, -P, -q, the two-pass variance, the averaged median and the new
  relative "+/- %" term) compiled on Linux with no-op capsicum stubs and FreeBSD's
  BUFSIZ (1024).  It is run with POSIXLY_CORRECT=1 so glibc's getopt stops at the first
  operand as FreeBSD's does.  Two glibc-vs-FreeBSD-libc differences are mapped back to
  what FreeBSD prints: getopt's messages ("invalid option -- 'z'" -> "illegal option --
  z", "option requires an argument -- 'c'" -> "... -- c") and printf's "-nan" (FreeBSD
  prints "nan" whatever the sign).  Its outputs are cases/NAME.{args,stdin,out,err,rc}.

* DEBIAN (/usr/bin/ministat, package ministat 20150715): an older FreeBSD ministat.  For
  each case it can run (no -q/-P, which it lacks) it is run too; when its output differs
  from the oracle's only in the relative "\t<d>% +/- <e>%" line(s) -- Debian computes
  e*100/avg0, current FreeBSD t*sqrt(((n-1)V + (n0-1)V0*avg^2/avg0^2)*(n+n0)/(n*n0*df))
  *100/avg0 -- its raw output is kept as debian/NAME.{out,err,rc}; the Rust test patches
  exactly those lines with the value it computes itself.  Cases where Debian differs
  otherwise (median of an even count, one-pass variance, messages, exit codes, trailing
  white space, BUFSIZ 8192, ...) are listed with the differing lines in
  debian/DIFFERENCES.txt.

Run from anywhere: MINISTAT_FREEBSD=/path/to/ministat python3 generate.py
"""
import os, re, shutil, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
CASES = os.path.join(HERE, "cases")
DEBIAN = os.path.join(HERE, "debian")
ORACLE = os.environ.get("MINISTAT_FREEBSD")
DEBIAN_BIN = "/usr/bin/ministat"

M = ["iguana", "chameleon"]
SEVEN = ["set_" + c for c in "abcdefg"]
# (name, args, stdin file or None)
CASE_LIST = [
    ("man_default", M, None),
    ("man_s_w60", ["-s", "-w", "60"] + M, None),
    ("man_s_w60_c80", ["-s", "-w", "60", "-c", "80"] + M, None),
    ("man_c80", ["-c", "80"] + M, None),
    ("man_c90", ["-c", "90"] + M, None),
    ("man_c98", ["-c", "98"] + M, None),
    ("man_c99", ["-c", "99"] + M, None),
    ("man_c99.5", ["-c", "99.5"] + M, None),
    ("man_n", ["-n"] + M, None),
    ("man_A_c80", ["-A", "-c", "80"] + M, None),
    ("man_q", ["-q"] + M, None),
    ("man_q_c80", ["-q", "-c", "80"] + M, None),
    ("man_P", ["-P"] + M, None),
    ("man_P_c80_s", ["-P", "-c", "80", "-s"] + M, None),
    ("man_nq", ["-nq"] + M, None),
    ("man_sAq", ["-sAq"] + M, None),
    # -w 0: C writes outside its zero-width buffers (undefined); this is what it prints.
    ("man_w0", ["-w", "0"] + M, None),
    ("man_w2", ["-w", "2"] + M, None),
    ("man_w3", ["-w", "3"] + M, None),
    ("man_w20_s", ["-w", "20", "-s"] + M, None),
    ("man_w132", ["-w", "132"] + M, None),
    ("man_reversed", ["-c", "80", "chameleon", "iguana"], None),
    ("man_clustered", ["-ns", "-w40"] + M, None),
    ("man_clustered_c", ["-sc80", "-w", "50"] + M, None),
    ("man_c_attached", ["-c99", "-w", "40"] + M, None),
    ("man_c_twice", ["-c", "80", "-c", "97"] + M, None),
    ("man_c_float_forms", ["-c", " 9.5e1"] + M, None),
    ("man_c_95.0", ["-c", "95.0"] + M, None),
    ("man_C_wrap", ["-C", "4294967297"] + M, None),
    ("man_w_wrap", ["-w", "4294967336"] + M, None),
    ("man_dashdash", ["-s", "--"] + M, None),
    ("iguana_single", ["iguana"], None),
    ("pps_base_tuned", ["pps_base", "pps_tuned"], None),
    ("pps_base_tuned_s", ["-s", "pps_base", "pps_tuned"], None),
    ("pps_base_tuned_c99.5", ["-c", "99.5", "pps_base", "pps_tuned"], None),
    ("pps_base_tuned_c80", ["-c", "80", "pps_base", "pps_tuned"], None),
    ("pps_base_tuned_c90", ["-c", "90", "pps_base", "pps_tuned"], None),
    ("pps_base_tuned_c98", ["-c", "98", "pps_base", "pps_tuned"], None),
    ("pps_base_tuned_c99", ["-c", "99", "pps_base", "pps_tuned"], None),
    ("pps_tuned_base", ["pps_tuned", "pps_base"], None),
    ("pps_slow_c99.5_A", ["-A", "-c", "99.5", "pps_base", "pps_slow", "pps_tuned"], None),
    ("pps_four_c80", ["-c", "80", "pps_base", "pps_tuned", "pps_same", "pps_noisy"], None),
    ("pps_noisy_vs_tuned_c80", ["-c", "80", "pps_noisy", "pps_tuned"], None),
    ("pps_base_same", ["pps_base", "pps_same"], None),
    ("pps_four", ["pps_base", "pps_tuned", "pps_same", "pps_noisy"], None),
    ("pps_four_s_A", ["-s", "pps_base", "pps_tuned", "pps_same", "pps_noisy"], None),
    ("pps_slow", ["pps_base", "pps_slow"], None),
    ("pps_single", ["pps_base"], None),
    ("pps_stdin", [], "pps_base"),
    ("pps_stdin_n", ["-n"], "pps_base"),
    ("pps_dash", ["-"], "pps_base"),
    ("pps_dash_first", ["-", "pps_tuned"], "pps_base"),
    ("even6", ["even6"], None),
    ("even6_vs_iguana", ["iguana", "even6"], None),
    ("const5", ["const5"], None),
    ("const5_const7", ["const5", "const7"], None),
    ("const5_pps", ["const5", "pps_base"], None),
    ("large", ["large"], None),
    ("large_n", ["-n", "large"], None),
    ("huge_n", ["-n", "huge"], None),
    ("tiny", ["tiny"], None),
    ("tiny_large", ["tiny", "large"], None),
    ("negative_mixed", ["negative", "mixed_sign"], None),
    ("small_diff", ["small_diff_a", "small_diff_b"], None),
    ("small_diff_c80", ["-c", "80", "small_diff_a", "small_diff_b"], None),
    ("many", ["many_a", "many_b"], None),
    ("many_c80", ["-c", "80", "many_a", "many_b"], None),
    ("many_s_w100", ["-s", "-w", "100", "many_a", "many_b"], None),
    ("repeats", ["repeats"], None),
    ("repeats_w20", ["-w", "20", "repeats"], None),
    ("repeats_vs_even6", ["repeats", "even6"], None),
    ("seven", SEVEN, None),
    ("seven_s", ["-s"] + SEVEN, None),
    ("seven_s_w30", ["-s", "-w", "30"] + SEVEN, None),
    ("columns_C2", ["-C", "2", "columns.txt"], None),
    ("columns_C3", ["-C", "3", "columns.txt"], None),
    ("columns_C1", ["-C", "1", "columns.txt"], None),
    ("columns_C2_vs_pps", ["-C", "2", "pps_base", "columns.txt"], None),
    ("csv_C2", ["-d", ",", "-C", "2", "data.csv"], None),
    ("csv_C3", ["-d,", "-C3", "data.csv"], None),
    ("semicolon", ["-d", ";", "-C", "2", "semicolon.txt"], None),
    ("semicolon_C1", ["-d;", "semicolon.txt"], None),
    ("crlf", ["crlf.txt"], None),
    ("forms", ["forms"], None),
    ("longline", ["longline.txt"], None),
    ("infinity_n", ["-n", "infinity"], None),
    # errors
    ("err_columns_C4", ["-C", "4", "columns.txt"], None),
    ("err_csv_C1", ["-d", ",", "data.csv"], None),
    ("err_bad_data", ["iguana", "bad_data"], None),
    ("err_longline_bad", ["longline_bad.txt"], None),
    ("err_two_points", ["two_points"], None),
    ("err_empty", ["empty"], None),
    ("err_empty_stdin", [], None),
    ("err_nofile", ["nofile"], None),
    ("err_nofile_second", ["iguana", "nofile", "bad_data"], None),
    ("err_directory", ["."], None),
    ("err_eight", SEVEN + ["iguana"], None),
    ("err_eight_missing", SEVEN + ["nofile"], None),
    ("err_unknown_option", ["-z"] + M, None),
    ("err_unknown_clustered", ["-nz"] + M, None),
    ("err_long_option", ["--help"], None),
    ("err_missing_arg_c", ["-c"], None),
    ("err_missing_arg_w", M + ["-w"], None),
    ("err_missing_arg_w_opt", ["-n", "-w"], None),
    ("err_c97", ["-c", "97"] + M, None),
    ("err_c_abc", ["-c", "abc"] + M, None),
    ("err_c_empty", ["-c", ""] + M, None),
    ("err_c_trailing", ["-c", "95 "] + M, None),
    ("err_C0", ["-C", "0"] + M, None),
    ("err_C_neg", ["-C", "-2"] + M, None),
    ("err_C_x", ["-C", "x"] + M, None),
    ("err_C_empty", ["-C", ""] + M, None),
    ("err_w_neg", ["-w", "-1"] + M, None),
    ("err_w_x", ["-w", "12x"] + M, None),
    ("err_d_empty", ["-d", ""] + M, None),
    ("err_option_after_file", ["iguana", "-n"], None),
    ("err_dashdash_option", ["--", "-n"], None),
    ("err_usage_first", ["-c", "97", "-z"], None),
]


def run(binary, args, stdin):
    env = dict(os.environ, POSIXLY_CORRECT="1", LC_ALL="C")
    env.pop("COLUMNS", None)
    inp = open(os.path.join(DATA, stdin), "rb") if stdin else subprocess.DEVNULL
    p = subprocess.run(["ministat"] + args, executable=binary, cwd=DATA, stdin=inp, capture_output=True, env=env)
    return p.stdout, p.stderr, p.returncode


def freebsdify(err, out):
    err = re.sub(rb"invalid option -- '(.)'", rb"illegal option -- \1", err)
    err = re.sub(rb"option requires an argument -- '(.)'", rb"option requires an argument -- \1", err)
    # "%13.8g" pads: keep the width; elsewhere (plain "%g") just drop the sign.
    lines = []
    for line in out.split(b"\n"):
        if re.match(rb"^. +\d+ ", line):  # a Vitals line
            line = re.sub(rb"( +)-nan", lambda m: m.group(1) + b" nan", line)
        lines.append(line.replace(b"-nan", b"nan"))
    out = b"\n".join(lines)
    return err, out


REL = re.compile(rb"^\t\S+% \+/- \S+%$")


def main():
    if not ORACLE:
        sys.exit("set MINISTAT_FREEBSD to a ministat built from FreeBSD's current ministat.c")
    for d in (CASES, DEBIAN):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    differences = []
    kept = 0
    for name, args, stdin in CASE_LIST:
        out, err, rc = run(ORACLE, args, stdin)
        err, out = freebsdify(err, out)
        base = os.path.join(CASES, name)
        with open(base + ".args", "w") as f:
            f.write("".join(a + "\n" for a in args))
        if stdin:
            shutil.copy(os.path.join(DATA, stdin), base + ".stdin")
        open(base + ".out", "wb").write(out)
        open(base + ".err", "wb").write(err)
        open(base + ".rc", "w").write("%d\n" % rc)
        if not os.path.exists(DEBIAN_BIN) or any(a.startswith("-") and ("q" in a or "P" in a) for a in args):
            continue
        dout, derr, drc = run(DEBIAN_BIN, args, stdin)
        ol, dl = out.split(b"\n"), dout.split(b"\n")
        same = derr == err and drc == rc and len(ol) == len(dl)
        patched = 0
        if same:
            for a, b in zip(ol, dl):
                if a == b:
                    continue
                if REL.match(a) and REL.match(b) and a.split(b" +/- ")[0] == b.split(b" +/- ")[0]:
                    patched += 1
                    continue
                same = False
        if same:
            kept += 1
            dbase = os.path.join(DEBIAN, name)
            open(dbase + ".out", "wb").write(dout)
            open(dbase + ".err", "wb").write(derr)
            open(dbase + ".rc", "w").write("%d\n" % drc)
        else:
            import difflib
            diff = difflib.unified_diff(
                (out + b"\n--stderr--\n" + err + b"\nrc=%d\n" % rc).decode("latin-1").splitlines(),
                (dout + b"\n--stderr--\n" + derr + b"\nrc=%d\n" % drc).decode("latin-1").splitlines(),
                "freebsd-current", "debian-20150715", lineterm="", n=0)
            differences.append("== %s: ministat %s\n%s\n" % (name, " ".join(args), "\n".join(diff)))
    with open(os.path.join(DEBIAN, "DIFFERENCES.txt"), "w") as f:
        f.write("Cases where Debian's ministat 20150715 differs from current FreeBSD other than\n"
                "in the relative '+/- %' line (so they are not used as Debian references).\n\n")
        f.write("\n".join(differences))
    print("%d cases, %d also checked against Debian, %d differ" % (len(CASE_LIST), kept, len(differences)))


main()
