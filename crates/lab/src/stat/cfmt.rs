//! The bits of the C library that ministat's output and parsing depend on, reimplemented:
//! `printf("%g")`, `strtod(3)`, `strtol(3)` and `isspace(3)` in the C/POSIX locale.
//!
//! `%g` follows C99 7.19.6.1 (and FreeBSD's libc): the value is first rounded to `P`
//! significant digits in `%e` style (correctly rounded, ties to even on the exact binary
//! value, which is what both FreeBSD's gdtoa and glibc do); the exponent `X` of that
//! decides between `%f` with `P - 1 - X` decimals (when `P > X >= -4`) and `%e` with
//! `P - 1` decimals; trailing zeros and a trailing decimal point are then removed.
//! Not-a-number prints as `nan` whatever its sign bit, as FreeBSD's printf does (glibc
//! would print `-nan` for a NaN with the sign bit set).

/// `isspace()` in the C locale.
pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// `printf("%.{prec}g", x)`.
pub fn fmt_g(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    let p = if prec == 0 { 1 } else { prec };
    // %e with P-1 decimals; Rust's `{:e}` is exact and rounds ties to even like printf.
    let e = format!("{:.*e}", p - 1, x);
    let (mant, exp) = e.split_once('e').expect("exponent");
    let exp: i64 = exp.parse().expect("exponent digits");
    if exp < -4 || exp >= p as i64 {
        let mant = strip_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (p as i64 - 1 - exp) as usize;
        strip_zeros(&format!("{:.*}", decimals, x)).to_string()
    }
}

/// `printf("%{width}.{prec}g", x)`: right-justified in `width` columns.
pub fn fmt_g_width(x: f64, width: usize, prec: usize) -> String {
    format!("{:>width$}", fmt_g(x, prec))
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { s }
}

/// `strtod(s, &end)` in the C locale: the value and the number of bytes consumed (0 when
/// no conversion could be performed, in which case C sets `end` to `s` itself).
/// Accepts leading white space, a sign, decimal and hexadecimal (`0x1.8p3`) forms,
/// `inf`/`infinity` and `nan`/`nan(chars)`, case-insensitively. Overflow gives ±inf and
/// underflow a correctly rounded subnormal or zero, as `strtod` does (ministat ignores
/// `errno`).
pub fn strtod(s: &[u8]) -> (f64, usize) {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let rest = &s[i..];
    match inf_or_nan(rest).or_else(|| hex_prefixed(rest)).or_else(|| decimal(rest)) {
        Some((v, n)) => (if neg { -v } else { v }, i + n),
        None => (0.0, 0),
    }
}

/// `inf`, `infinity`, `nan` or `nan(chars)`, case-insensitively, and the bytes consumed.
fn inf_or_nan(rest: &[u8]) -> Option<(f64, usize)> {
    if starts_with_ci(rest, b"inf") {
        let n = if starts_with_ci(rest, b"infinity") { 8 } else { 3 };
        return Some((f64::INFINITY, n));
    }
    if !starts_with_ci(rest, b"nan") {
        return None;
    }
    let mut n = 3;
    if rest.get(3) == Some(&b'(') {
        let mut k = 4;
        while k < rest.len() && (rest[k].is_ascii_alphanumeric() || rest[k] == b'_') {
            k += 1;
        }
        if rest.get(k) == Some(&b')') {
            n = k + 1;
        }
    }
    Some((f64::NAN, n))
}

/// A hexadecimal form after "0x"; `None` without the prefix.
fn hex_prefixed(rest: &[u8]) -> Option<(f64, usize)> {
    if rest.len() < 2 || rest[0] != b'0' || (rest[1] | 0x20) != b'x' {
        return None;
    }
    Some(match hex_float(&rest[2..]) {
        Some((v, n)) => (v, 2 + n),
        // "0x" with no hex digits: only the "0" converts.
        None => (0.0, 1),
    })
}

/// Decimal: digits [. digits] [e [sign] digits]; `None` without a mantissa digit.
fn decimal(rest: &[u8]) -> Option<(f64, usize)> {
    let mut k = 0;
    let mut digits = 0;
    while k < rest.len() && rest[k].is_ascii_digit() {
        k += 1;
        digits += 1;
    }
    if k < rest.len() && rest[k] == b'.' {
        k += 1;
        while k < rest.len() && rest[k].is_ascii_digit() {
            k += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    let mant_end = k;
    if k < rest.len() && (rest[k] | 0x20) == b'e' {
        let mut e = k + 1;
        if e < rest.len() && (rest[e] == b'+' || rest[e] == b'-') {
            e += 1;
        }
        let start = e;
        while e < rest.len() && rest[e].is_ascii_digit() {
            e += 1;
        }
        if e > start {
            k = e;
        }
    }
    let text = std::str::from_utf8(&rest[..k]).expect("ascii");
    let v = match text.parse::<f64>() {
        Ok(v) => v,
        // Rust rejects a few forms C accepts ("1." / ".5" are fine, but be safe): retry
        // with an explicit zero around the point.
        Err(_) => {
            let m = std::str::from_utf8(&rest[..mant_end]).expect("ascii");
            let fixed = format!("0{m}0{}", &text[mant_end..]);
            fixed.parse::<f64>().unwrap_or(0.0)
        }
    };
    Some((v, k))
}

fn starts_with_ci(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len() && s[..word.len()].eq_ignore_ascii_case(word)
}

/// Hexadecimal significand after "0x": hex digits [. hex digits] [p [sign] digits].
/// Returns the (positive) value, correctly rounded, and the bytes consumed.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let mut mant: u128 = 0;
    let mut sticky = false;
    let mut exp2: i64 = 0;
    let mut digits = 0;
    let mut k = 0;
    let mut seen_point = false;
    while k < s.len() {
        let c = s[k];
        if c == b'.' && !seen_point {
            seen_point = true;
            k += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else {
            break;
        };
        digits += 1;
        if mant >> 120 == 0 {
            mant = (mant << 4) | d as u128;
            if seen_point {
                exp2 -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_point {
                exp2 += 4;
            }
        }
        k += 1;
    }
    if digits == 0 {
        return None;
    }
    if k < s.len() && (s[k] | 0x20) == b'p' {
        let mut e = k + 1;
        let mut eneg = false;
        if e < s.len() && (s[e] == b'+' || s[e] == b'-') {
            eneg = s[e] == b'-';
            e += 1;
        }
        let start = e;
        let mut val: i64 = 0;
        while e < s.len() && s[e].is_ascii_digit() {
            val = (val * 10 + (s[e] - b'0') as i64).min(1 << 40);
            e += 1;
        }
        if e > start {
            exp2 += if eneg { -val } else { val };
            k = e;
        }
    }
    Some((round_binary(mant, sticky, exp2), k))
}

/// `(mant + sticky·ε) · 2^exp2`, rounded to the nearest double, ties to even.
fn round_binary(mant: u128, sticky: bool, exp2: i64) -> f64 {
    if mant == 0 {
        return 0.0;
    }
    let bits = 128 - mant.leading_zeros() as i64;
    let e = exp2 + bits - 1; // value in [2^e, 2^(e+1))
    if e > 1023 {
        return f64::INFINITY;
    }
    // Significant bits kept: 53 for normal numbers, fewer for subnormals.
    let keep = if e >= -1022 { 53 } else { 53 + (e + 1022) };
    if keep < 0 {
        return 0.0;
    }
    let shift = bits - keep;
    let q: u128 = if shift > 0 {
        let shift = shift as u32;
        let q = if shift >= 128 { 0 } else { mant >> shift };
        let rem = if shift >= 128 { mant } else { mant & ((1u128 << shift) - 1) };
        let half = 1u128 << (shift - 1).min(127);
        let up =
            if shift > 128 { false } else { rem > half || (rem == half && (sticky || q & 1 == 1)) };
        q + up as u128
    } else {
        mant << (-shift) as u32
    };
    // value = q · 2^(e - keep + 1), exactly representable now (or overflowing to inf).
    let mut v = q as f64;
    let mut k = e - keep + 1;
    while k > 1000 {
        v *= f64::from_bits(((1000 + 1023) as u64) << 52);
        k -= 1000;
    }
    while k < -1000 {
        v *= f64::from_bits(((-1000 + 1023) as u64) << 52);
        k += 1000;
    }
    v * f64::from_bits(((k + 1023) as u64) << 52)
}

/// `strtol(s, &end, 10)`: the value (saturated to the `long` range, 64 bits as on amd64
/// FreeBSD) and the number of bytes consumed (0 when there are no digits).
pub fn strtol(s: &[u8]) -> (i64, usize) {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut acc: i128 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        acc = (acc * 10 + (s[i] - b'0') as i128).min(1 << 70);
        i += 1;
    }
    if i == start {
        return (0, 0);
    }
    let v = if neg { -acc } else { acc };
    (v.clamp(i64::MIN as i128, i64::MAX as i128) as i64, i)
}

/// `(int)strtol(...)`: C converts the `long` to `int` by keeping the low 32 bits.
pub fn long_to_int(v: i64) -> i32 {
    v as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_forms() {
        assert_eq!(strtod(b"1.5"), (1.5, 3));
        assert_eq!(strtod(b"  -2e3x"), (-2000.0, 6));
        assert_eq!(strtod(b"1e"), (1.0, 1));
        assert_eq!(strtod(b"1e+"), (1.0, 1));
        assert_eq!(strtod(b".5"), (0.5, 2));
        assert_eq!(strtod(b"5."), (5.0, 2));
        assert_eq!(strtod(b"."), (0.0, 0));
        assert_eq!(strtod(b"abc"), (0.0, 0));
        assert_eq!(strtod(b"-"), (0.0, 0));
        assert_eq!(strtod(b"0x1p3"), (8.0, 5));
        assert_eq!(strtod(b"0x1.8"), (1.5, 5));
        assert_eq!(strtod(b"0xg"), (0.0, 1));
        assert_eq!(strtod(b"0x.8p-1"), (0.25, 7));
        assert_eq!(strtod(b"0x1p-1074"), (f64::from_bits(1), 9));
        assert_eq!(strtod(b"0x1p-1075"), (0.0, 9));
        assert_eq!(strtod(b"0x3p-1076"), (f64::from_bits(1), 9));
        assert_eq!(strtod(b"0x1p1024"), (f64::INFINITY, 8));
        assert_eq!(strtod(b"0x1.fffffffffffff8p0").0, 2.0);
        assert_eq!(strtod(b"0x1.fffffffffffff7p0").0, f64::from_bits(0x3fff_ffff_ffff_ffff));
        assert_eq!(strtod(b"0x1.00000000000008p0").0, 1.0);
        assert_eq!(strtod(b"0x1.000000000000080000000000000000000001p0").0, 1.0 + f64::EPSILON);
        assert_eq!(strtod(b"INF"), (f64::INFINITY, 3));
        assert_eq!(strtod(b"-Infinity"), (f64::NEG_INFINITY, 9));
        assert_eq!(strtod(b"infinit").1, 3);
        let (v, n) = strtod(b"nan(12ab)");
        assert!(v.is_nan() && n == 9);
        assert_eq!(strtod(b"nan(12").1, 3);
        assert_eq!(strtod(b"1e999"), (f64::INFINITY, 5));
        assert_eq!(strtod(b"1e-999"), (0.0, 6));
        assert_eq!(strtod(b"95"), (95.0, 2));
        assert_eq!(strtod(b"9.5e1"), (95.0, 5));
    }

    #[test]
    fn strtol_forms() {
        assert_eq!(strtol(b"12"), (12, 2));
        assert_eq!(strtol(b" -3z"), (-3, 3));
        assert_eq!(strtol(b""), (0, 0));
        assert_eq!(strtol(b" "), (0, 0));
        assert_eq!(strtol(b"+"), (0, 0));
        assert_eq!(strtol(b"99999999999999999999999"), (i64::MAX, 23));
        assert_eq!(strtol(b"-99999999999999999999999"), (i64::MIN, 24));
        assert_eq!(long_to_int(4294967297), 1);
        assert_eq!(long_to_int(i64::MAX), -1);
    }
}
