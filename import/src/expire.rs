//! Expiry rules: lighttpd mod_expire's grammar (checked and normalized for
//! Tessera's `expires` module) and Cherokee's `expiration!time` shorthand.

/// What an expiry counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// `access` or `now`: the time of the response.
    Access,
    /// `modification`: the file's modification time.
    Modification,
}

/// A parsed lighttpd expiry rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expire {
    /// The base.
    pub base: Base,
    /// The lifetime in seconds (months are 30 days, years 365 days).
    pub seconds: u64,
    /// Whether a `year` unit was used (lighttpd before 1.4.74 counted 360
    /// days, 1.4.74 and later 365).
    pub uses_years: bool,
}

impl Expire {
    /// The rule in the form Tessera writes: `"access plus 3600 seconds"`,
    /// keeping the largest whole unit (`"access plus 2 weeks"`).
    pub fn to_tessera(&self) -> String {
        let base = match self.base {
            Base::Access => "access",
            Base::Modification => "modification",
        };
        let s = self.seconds;
        let (n, unit) = [
            (31_536_000, "years"),
            (2_592_000, "months"),
            (604_800, "weeks"),
            (86_400, "days"),
            (3_600, "hours"),
            (60, "minutes"),
        ]
        .iter()
        .find(|(u, _)| s > 0 && s.is_multiple_of(*u))
        .map_or((s, "seconds"), |(u, name)| (s / u, *name));
        format!("{base} plus {n} {unit}")
    }
}

fn unit_seconds(u: &str) -> Option<u64> {
    let u = u.strip_suffix('s').unwrap_or(u);
    Some(match u {
        "year" => 31_536_000,
        "month" => 2_592_000,
        "week" => 604_800,
        "day" => 86_400,
        "hour" => 3_600,
        "minute" | "min" => 60,
        "second" | "sec" => 1,
        _ => return None,
    })
}

/// Parses a lighttpd mod_expire rule, in every form lighttpd 1.4 accepts:
/// `<access|now|modification> [plus] (<number> <unit>)+`, where the unit is
/// `year`, `month`, `week`, `day`, `hour`, `minute`/`min`, `second`/`sec`,
/// singular or plural, and may follow its number without a space (`1day`,
/// lighttpd 1.4.74 and later). Several pairs add up.
///
/// # Errors
/// A message naming the offending word (lighttpd refuses to start on these).
pub fn parse_lighttpd(s: &str) -> Result<Expire, String> {
    let mut words = s.split_whitespace().peekable();
    let base = match words.next() {
        Some("access" | "now") => Base::Access,
        Some("modification") => Base::Modification,
        Some(w) => {
            return Err(format!(
                "\"{s}\": unknown base \"{w}\" (access, now or modification)"
            ))
        }
        None => return Err("empty expire rule".into()),
    };
    if words.peek() == Some(&"plus") {
        words.next();
    }
    // Re-split the rest into number and unit tokens (`1day` is two tokens).
    let rest: Vec<&str> = words.collect();
    let joined = rest.join(" ");
    let mut toks: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut digits = false;
    for c in joined.chars() {
        if c.is_whitespace() {
            if !cur.is_empty() {
                toks.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let d = c.is_ascii_digit();
        if !cur.is_empty() && d != digits {
            toks.push(std::mem::take(&mut cur));
        }
        digits = d;
        cur.push(c);
    }
    if !cur.is_empty() {
        toks.push(cur);
    }
    if toks.is_empty() {
        return Err(format!("\"{s}\": no \"<number> <unit>\" pair"));
    }
    let mut seconds: u64 = 0;
    let mut uses_years = false;
    let mut it = toks.iter();
    while let Some(n) = it.next() {
        let n: u64 = n
            .parse()
            .map_err(|_| format!("\"{s}\": \"{n}\" is not a number"))?;
        let Some(u) = it.next() else {
            return Err(format!("\"{s}\": missing unit after {n}"));
        };
        let mult = unit_seconds(u).ok_or_else(|| format!("\"{s}\": unknown unit \"{u}\""))?;
        uses_years |= mult == 31_536_000;
        seconds = n
            .checked_mul(mult)
            .and_then(|x| x.checked_add(seconds))
            .filter(|&t| t <= 1 << 31)
            .ok_or_else(|| format!("\"{s}\": longer than 2^31 seconds"))?;
    }
    Ok(Expire {
        base,
        seconds,
        uses_years,
    })
}

/// Parses Cherokee's `expiration!time`: a number with an optional unit letter
/// `s`, `m` (minutes), `h`, `d`, `w`; a bare number is seconds. Returns seconds.
///
/// # Errors
/// A message quoting the value.
pub fn parse_cherokee_time(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&t[..i], t[i..].trim()),
        None => (t, ""),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("\"{s}\": expected a number with s, m, h, d or w"))?;
    let mult = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(format!("\"{s}\": unknown unit \"{unit}\" (s, m, h, d, w)")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("\"{s}\": too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lighttpd_form() {
        let p = |s| parse_lighttpd(s).unwrap();
        assert_eq!(p("access plus 1 seconds 2 minutes").seconds, 121);
        assert_eq!(p("now plus 1 hour").seconds, 3600);
        assert_eq!(p("access 1 hour").seconds, 3600);
        assert_eq!(
            p("modification plus 2 weeks 3 days").base,
            Base::Modification
        );
        assert_eq!(p("modification plus 2 weeks 3 days").seconds, 17 * 86400);
        assert_eq!(p("access plus 1day").seconds, 86400);
        assert_eq!(p("access plus 2min1sec").seconds, 121);
        assert_eq!(p("access plus 1 min 1 sec").seconds, 61);
        assert_eq!(p("access plus 1 month").seconds, 2_592_000);
        assert_eq!(p("access plus 0 seconds").seconds, 0);
        let y = p("access plus 1 years");
        assert!(y.uses_years);
        assert_eq!(y.seconds, 31_536_000);
        assert!(parse_lighttpd("access plus 1 mounths").is_err());
        assert!(parse_lighttpd("later plus 1 day").is_err());
        assert!(parse_lighttpd("access plus").is_err());
        assert!(parse_lighttpd("access plus 1").is_err());
        assert!(parse_lighttpd("").is_err());
        assert_eq!(p("access plus 14 days").to_tessera(), "access plus 2 weeks");
        assert_eq!(
            p("access plus 0 seconds").to_tessera(),
            "access plus 0 seconds"
        );
        assert_eq!(
            p("modification plus 90 seconds").to_tessera(),
            "modification plus 90 seconds"
        );
    }

    #[test]
    fn cherokee_times() {
        assert_eq!(parse_cherokee_time("7d"), Ok(604_800));
        assert_eq!(parse_cherokee_time("1h"), Ok(3_600));
        assert_eq!(parse_cherokee_time("30m"), Ok(1_800));
        assert_eq!(parse_cherokee_time("2w"), Ok(1_209_600));
        assert_eq!(parse_cherokee_time("90"), Ok(90));
        assert_eq!(parse_cherokee_time("90s"), Ok(90));
        assert!(parse_cherokee_time("1y").is_err());
        assert!(parse_cherokee_time("x").is_err());
    }
}
