//! A small parser for Kubernetes resource quantities (`100m`, `1.5`, `128Mi`, `1G`, `2e3`).
//!
//! Values are held as whole nano-units in an `i128`, so that `500m + 500m == 1` and
//! `1Gi == 1024Mi` compare exactly, as `resource.Quantity.Cmp` does; fractions below one nano-unit
//! round up, like the apiserver's canonical form.
//!
//! Written here rather than taken from a crate: k8s-openapi's `Quantity` is only the string,
//! and the messages must be the apiserver's word for word in a module the wasm32 provider links.

/// The wording of the decode error the apiserver gives for a malformed quantity.
pub const QUANTITY_FORMAT_ERR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Parses a quantity into nano-units; the error is the message to report.
pub fn parse_nanos(s: &str) -> Result<i128, String> {
    let wrong = || QUANTITY_FORMAT_ERR.to_string();
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        Some(_) => (false, s),
        None => return Err(wrong()),
    };
    let num_len = rest.bytes().take_while(|c| c.is_ascii_digit() || *c == b'.').count();
    let (number, suffix) = rest.split_at(num_len);
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
        return Err(wrong());
    }
    let (binary_shift, decimal_exp) = parse_suffix(suffix).ok_or_else(wrong)?;

    let too_large = || "quantity is too large".to_string();
    let mut mantissa: i128 = 0;
    for c in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa.checked_mul(10).and_then(|m| m.checked_add(i128::from(c - b'0'))).ok_or_else(too_large)?;
    }
    let frac_digits = i64::try_from(frac_part.len()).map_err(|_| too_large())?;
    let binary = 1i128.checked_shl(binary_shift).ok_or_else(too_large)?;
    mantissa = mantissa.checked_mul(binary).ok_or_else(too_large)?;
    // value = mantissa * 10^(decimal_exp + 9 - frac_digits) nano-units.
    let exp = decimal_exp + 9 - frac_digits;
    let nanos = if exp >= 0 {
        let scale = 10i128.checked_pow(u32::try_from(exp).map_err(|_| too_large())?).ok_or_else(too_large)?;
        mantissa.checked_mul(scale).ok_or_else(too_large)?
    } else {
        let scale = u32::try_from(-exp).ok().and_then(|e| 10i128.checked_pow(e));
        match scale {
            Some(scale) => (mantissa + scale - 1) / scale,
            None => i128::from(mantissa > 0),
        }
    };
    Ok(if negative { -nanos } else { nanos })
}

/// A quantity as it appears in an object (a JSON string, or a bare number), in nano-units;
/// `None` for anything else or a malformed one.
pub fn value_nanos(v: &serde_json::Value) -> Option<i128> {
    match v {
        serde_json::Value::String(s) => parse_nanos(s).ok(),
        serde_json::Value::Number(n) => parse_nanos(&n.to_string()).ok(),
        _ => None,
    }
}

/// Whether a quantity was written with a binary suffix (`Ki` ... `Ei`): its canonical form keeps
/// binary units, as `resource.Quantity` keeps the format it was parsed with.
pub fn is_binary(s: &str) -> bool {
    s.ends_with('i')
}

/// The canonical text of a value in nano-units, as `resource.Quantity.String()` prints it: the
/// largest binary unit that keeps the number whole for binary quantities (`1Gi`, `1536Mi`),
/// otherwise the largest power-of-1000 suffix that does (`1500m`, `2`, `1k`).
pub fn format_nanos(nanos: i128, binary: bool) -> String {
    const NANO: i128 = 1_000_000_000;
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.abs();
    if n == 0 {
        return "0".to_string();
    }
    if binary && n % NANO == 0 && n / NANO >= 1024 {
        let mut whole = n / NANO;
        let mut unit = 0;
        while whole % 1024 == 0 && unit < 6 {
            whole /= 1024;
            unit += 1;
        }
        if unit > 0 {
            return format!("{sign}{whole}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][unit]);
        }
    }
    let suffixes: [(i128, &str); 4] = [(1, "n"), (1_000, "u"), (1_000_000, "m"), (NANO, "")];
    if n % NANO == 0 {
        let mut whole = n / NANO;
        let mut unit = 0;
        while whole % 1000 == 0 && unit < 6 {
            whole /= 1000;
            unit += 1;
        }
        return format!("{sign}{whole}{}", ["", "k", "M", "G", "T", "P", "E"][unit]);
    }
    let (scale, suffix) = suffixes.iter().rev().find(|(scale, _)| n % scale == 0).copied().unwrap_or((1, "n"));
    format!("{sign}{}{suffix}", n / scale)
}

/// Returns (binary shift, decimal exponent) for a suffix, or None when it is not one.
fn parse_suffix(suffix: &str) -> Option<(u32, i64)> {
    let known = match suffix {
        "" => (0, 0),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        _ => {
            let exp = suffix.strip_prefix('e').or_else(|| suffix.strip_prefix('E'))?;
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let value: i64 = exp.parse().ok()?;
            if value.abs() > 60 {
                return None;
            }
            (0, value)
        }
    };
    Some(known)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_suffix_family() {
        assert_eq!(parse_nanos("100m"), Ok(100_000_000));
        assert_eq!(parse_nanos("1"), Ok(1_000_000_000));
        assert_eq!(parse_nanos("1.5"), Ok(1_500_000_000));
        assert_eq!(parse_nanos("128Mi"), Ok(128 * 1024 * 1024 * 1_000_000_000));
        assert_eq!(parse_nanos("1G"), Ok(1_000_000_000 * 1_000_000_000));
        assert_eq!(parse_nanos("2e3"), Ok(2_000 * 1_000_000_000));
        assert_eq!(parse_nanos("2E-3"), Ok(2_000_000));
        assert_eq!(parse_nanos(".5"), Ok(500_000_000));
        assert_eq!(parse_nanos("-1k"), Ok(-1_000 * 1_000_000_000));
        assert_eq!(parse_nanos("1n"), Ok(1));
        assert_eq!(parse_nanos("0.1n"), Ok(1));
    }

    #[test]
    fn equal_values_in_different_units_compare_equal() {
        assert_eq!(parse_nanos("1Gi"), parse_nanos("1024Mi"));
        assert_eq!(parse_nanos("0.5"), parse_nanos("500m"));
    }

    #[test]
    fn object_quantities_are_strings_or_bare_numbers() {
        assert_eq!(value_nanos(&serde_json::json!("500m")), Some(500_000_000));
        assert_eq!(value_nanos(&serde_json::json!(2)), Some(2_000_000_000));
        assert_eq!(value_nanos(&serde_json::json!("1e1.5")), None);
        assert_eq!(value_nanos(&serde_json::json!(true)), None);
    }

    #[test]
    fn canonical_forms_read_like_resource_quantity() {
        let f = |s: &str| format_nanos(parse_nanos(s).unwrap_or_default(), is_binary(s));
        for (given, canonical) in [
            ("500m", "500m"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("1000", "1k"),
            ("0.5", "500m"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("3", "3"),
            ("0", "0"),
        ] {
            assert_eq!(f(given), canonical, "{given}");
        }
    }

    #[test]
    fn rejects_malformed_quantities() {
        for bad in ["", "abc", "1.2.3", "1Xi", "1e", "Mi", "1 Gi", "."] {
            assert_eq!(parse_nanos(bad), Err(QUANTITY_FORMAT_ERR.to_string()), "{bad}");
        }
        assert!(parse_nanos("99999999999999999999999999999999999999").is_err());
    }
}
