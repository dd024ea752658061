//! RFC 3339 time stamps, as Kubernetes writes them (`2026-11-29T09:41:56Z`, and with a
//! fraction for `MicroTime`): formatting in UTC with whole seconds, and parsing any offset.
//!
//! Written here instead of taken from a date crate: the provider component only ever needs
//! these two conversions, and jiff's parser and `strftime` cost it 28 KiB. The tests hold both to `jiff`
//! over the whole range.

/// Seconds from 0000-01-01T00:00:00Z to the Unix epoch.
const YEAR_ZERO: i64 = -62_167_219_200;
/// 9999-12-31T23:59:59Z, the latest time RFC 3339 can write.
const YEAR_9999_END: i64 = 253_402_300_799;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Formats epoch millis in UTC with whole seconds (`2026-11-29T09:41:56Z`), rounding down so a
/// deadline is never later than asked. Outside the years 0000..=9999 (all RFC 3339 can write)
/// it clamps to the nearest end, so a time far in the past never reads as one in the future.
pub fn format_seconds(epoch_millis: i64) -> String {
    let seconds = epoch_millis.div_euclid(1000).clamp(YEAR_ZERO, YEAR_9999_END);
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let of_day = seconds.rem_euclid(86_400);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", of_day / 3600, of_day / 60 % 60, of_day % 60)
}

/// Reads `n` ASCII digits at `at`.
fn digits(bytes: &[u8], at: usize, n: usize) -> Option<i64> {
    let part = bytes.get(at..at + n)?;
    part.iter().try_fold(0i64, |acc, b| b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0')))
}

/// Parses an RFC 3339 time stamp (`2026-11-30T10:01:56Z`, `...56.123456Z`, `...56+02:00`; `t`,
/// `z` and a space separator accepted) into epoch millis, the fraction rounded down to the
/// millisecond; a leap second reads as the second before it. `None` for anything else.
pub fn parse(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let (year, month, day) = (digits(b, 0, 4)?, digits(b, 5, 2)?, digits(b, 8, 2)?);
    let (hour, minute, second) = (digits(b, 11, 2)?, digits(b, 14, 2)?, digits(b, 17, 2)?);
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if separators.iter().any(|(i, c)| b[*i] != *c) || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) || hour > 23 || minute > 59 {
        return None;
    }
    let second = match second {
        0..=59 => second,
        60 => 59,
        _ => return None,
    };
    let mut at = 19;
    let mut millis = 0;
    if b.get(at) == Some(&b'.') {
        let start = at + 1;
        let len = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
        if len == 0 {
            return None;
        }
        millis =
            (0..3).fold(0, |acc, i| acc * 10 + b.get(start + i).filter(|_| i < len).map_or(0, |c| i64::from(c - b'0')));
        at = start + len;
    }
    let offset_seconds = match b.get(at..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), ..] if b.len() == at + 6 && b[at + 3] == b':' => {
            let (h, m) = (digits(b, at + 1, 2)?, digits(b, at + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let offset = h * 3600 + m * 60;
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return None,
    };
    let local = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Some((local - offset_seconds) * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn kubernetes_time_stamps_both_ways() {
        assert_eq!(format_seconds(1_796_032_916_999), "2026-11-30T10:01:56Z");
        assert_eq!(parse("2026-11-30T10:01:56Z"), Some(1_796_032_916_000));
        assert_eq!(parse("2026-11-30T10:01:56.123456Z"), Some(1_796_032_916_123));
        assert_eq!(parse("2026-11-30T12:01:56+02:00"), Some(1_796_032_916_000));
        assert_eq!(parse("2026-11-30t10:01:56z"), Some(1_796_032_916_000));
        assert_eq!(parse("2016-12-31T23:59:60Z"), parse("2016-12-31T23:59:59Z"), "a leap second");
        assert_eq!(format_seconds(-1), "1969-12-31T23:59:59Z");
        assert_eq!(format_seconds(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn clamps_to_the_nearest_end_of_what_rfc3339_writes() {
        assert_eq!(format_seconds(i64::MAX), "9999-12-31T23:59:59Z");
        assert_eq!(format_seconds(i64::MIN), "0000-01-01T00:00:00Z", "the earliest, not the latest");
        assert_eq!(format_seconds(YEAR_ZERO * 1000 - 1), "0000-01-01T00:00:00Z", "not year -1");
    }

    #[test]
    fn refuses_what_is_not_a_time_stamp() {
        for bad in [
            "",
            "not a time",
            "2026-11-30",
            "2026-11-30T10:01:56",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-31T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T10:60:00Z",
            "2026-11-30T10:01:61Z",
            "2026-11-30T10:01:56.Z",
            "2026-11-30T10:01:56+0200",
            "2026-11-30T10:01:56+24:00",
            "2026/11/30T10:01:56Z",
            "2026-11-30T10:01:56Zjunk",
            "+2026-11-30T10:01:56Z",
            "2026-11-30T10:01:56\u{e9}",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(parse("2024-02-29T00:00:00Z").map(|m| m > 0), Some(true), "a leap day");
    }

    proptest! {
        #[test]
        fn formats_as_jiff_does(seconds in YEAR_ZERO..=YEAR_9999_END, millis in 0i64..1000) {
            let ts = jiff::Timestamp::from_second(seconds).expect("in jiff's range");
            prop_assert_eq!(format_seconds(seconds * 1000 + millis), ts.to_string());
            prop_assert_eq!(parse(&format_seconds(seconds * 1000 + millis)), Some(seconds * 1000));
        }

        #[test]
        fn parses_as_jiff_does(seconds in YEAR_ZERO + 86_400..YEAR_9999_END - 86_400, nanos in 0i32..1_000_000_000,
                               offset_minutes in -(23 * 60 + 59)..=(23 * 60 + 59)) {
            let ts = jiff::Timestamp::new(seconds, nanos).expect("in jiff's range");
            let offset = jiff::tz::Offset::from_seconds(offset_minutes * 60).expect("an offset");
            let text = ts.display_with_offset(offset).to_string();
            // Rounded down: jiff's `as_millisecond` truncates toward zero before 1970.
            let millis = i64::try_from(ts.as_nanosecond().div_euclid(1_000_000)).expect("in range");
            prop_assert_eq!(parse(&text), Some(millis), "{}", text);
        }
    }
}
