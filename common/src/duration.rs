//! The one duration grammar of the command line (`--call-timeout`, `--session-idle`,
//! `explore --time`): a positive decimal number followed by a unit, `ms`, `s`, `m` (or `min`)
//! or `h`; a number without a unit is seconds. `500ms`, `1.5s`, `90`, `5m`, `5min`, `1h`.

use std::time::Duration;

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    #[error("{0:?} is not a duration like 500ms, 90s, 5m or 1h")]
    NotANumber(String),
    #[error("{0:?}: unknown unit {1:?} (ms, s, m or min, h)")]
    UnknownUnit(String, String),
    #[error("{0:?}: a duration must be positive")]
    NotPositive(String),
}

/// Parses one duration (see the module docs for the grammar).
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| DurationError::NotANumber(s.to_owned()))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => return Err(DurationError::UnknownUnit(s.to_owned(), other.to_owned())),
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(DurationError::NotPositive(s.to_owned()));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_of_the_grammar_parses() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("5min"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse(" 90s "), Ok(Duration::from_secs(90)));
    }

    #[test]
    fn zero_unknown_units_and_non_numbers_are_refused_with_what_was_given() {
        assert_eq!(parse("5x"), Err(DurationError::UnknownUnit("5x".into(), "x".into())));
        assert_eq!(parse("0s"), Err(DurationError::NotPositive("0s".into())));
        assert_eq!(parse(""), Err(DurationError::NotANumber(String::new())));
        assert_eq!(parse("ms"), Err(DurationError::NotANumber("ms".into())));
        assert!(parse("1e400s").is_err());
    }
}
