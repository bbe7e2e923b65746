//! The import report: every option of the source configuration, said once, as
//! translated, approximated (and how), dropped (and why) or not needed, each
//! with the source file and line it came from. A dropped option whose loss
//! leaves something less protected than the source configuration had it (a
//! check no longer made, a file now served, plain HTTP where there was TLS)
//! starts its message with [`WEAKER`].

use std::fmt;

/// A place in a source configuration file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Src {
    /// The file as it was opened (the path given on the command line, an
    /// included file's path, or `<include_shell …>` for a generated include).
    pub file: String,
    /// 1-based line number.
    pub line: u32,
}

impl Src {
    /// A place: `file` and 1-based `line`.
    pub fn new(file: impl Into<String>, line: u32) -> Src {
        Src {
            file: file.into(),
            line,
        }
    }
}

impl fmt::Display for Src {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// The start of a message (`WEAKER: `) saying that the import is less
/// protective than the source configuration: what the option guarded (an
/// authorizer's check, a file kept from being served, TLS) is now served
/// without it, and the operator has to restore it by hand (`auth-basic`,
/// `access`, a TLS front end). Such entries are [`Outcome::Dropped`].
pub const WEAKER: &str = "WEAKER: ";

/// How an option fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    /// Carried over with the same behaviour.
    Translated,
    /// Carried over with a difference the message explains (a warning).
    Approximated,
    /// Not carried over; the message says why (a warning).
    Dropped,
    /// Not carried over because Tessera does not need it (a user or pid file,
    /// an error log): not a warning.
    NotNeeded,
}

impl Outcome {
    /// The label printed in the report: `translated`, `approximated`, `dropped`,
    /// `not needed`.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Translated => "translated",
            Outcome::Approximated => "approximated",
            Outcome::Dropped => "dropped",
            Outcome::NotNeeded => "not needed",
        }
    }

    /// Whether the outcome is a warning (approximated or dropped).
    pub fn is_warning(self) -> bool {
        matches!(self, Outcome::Approximated | Outcome::Dropped)
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Where the option was written.
    pub src: Src,
    /// How it fared.
    pub outcome: Outcome,
    /// The option or construct, as written (`expire.url`, `$HTTP["host"]`,
    /// `vserver!1!rule!5!handler`).
    pub what: String,
    /// What became of it: the Tessera key for a translation, the difference for
    /// an approximation, the reason for a drop.
    pub message: String,
}

impl Entry {
    /// Whether the message says the import is less protective than the
    /// source configuration (it starts with [`WEAKER`]).
    pub fn is_weaker(&self) -> bool {
        self.message.starts_with(WEAKER)
    }
}

/// Everything the import has to say, in the order it was said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The entries, in the order they were recorded.
    pub entries: Vec<Entry>,
}

impl Report {
    /// Records an entry (an identical entry already recorded is not repeated).
    pub fn push(&mut self, src: &Src, outcome: Outcome, what: &str, message: impl Into<String>) {
        let e = Entry {
            src: src.clone(),
            outcome,
            what: what.to_owned(),
            message: message.into(),
        };
        if !self.entries.contains(&e) {
            self.entries.push(e);
        }
    }

    /// Records a translation.
    pub fn translated(&mut self, src: &Src, what: &str, message: impl Into<String>) {
        self.push(src, Outcome::Translated, what, message);
    }

    /// Records that `path` (a document root, an alias directory, a user file)
    /// is missing on the importing machine: a warning, since `tessera -t`
    /// refuses the output until it exists.
    pub fn missing(&mut self, src: &Src, what: &str, path: &str) {
        self.approximated(
            src,
            what,
            format!("{path} does not exist on this machine: create it before starting Tessera (tessera -t fails until then)"),
        );
    }

    /// Records an approximation (a warning).
    pub fn approximated(&mut self, src: &Src, what: &str, message: impl Into<String>) {
        self.push(src, Outcome::Approximated, what, message);
    }

    /// Records a dropped option (a warning).
    pub fn dropped(&mut self, src: &Src, what: &str, message: impl Into<String>) {
        self.push(src, Outcome::Dropped, what, message);
    }

    /// Records a dropped option whose loss weakens protection (a warning):
    /// `message` says what is now served without the check, and is recorded
    /// after [`WEAKER`].
    pub fn weaker(&mut self, src: &Src, what: &str, message: impl AsRef<str>) {
        self.dropped(src, what, format!("{WEAKER}{}", message.as_ref()));
    }

    /// Records an option Tessera does not need.
    pub fn not_needed(&mut self, src: &Src, what: &str, message: impl Into<String>) {
        self.push(src, Outcome::NotNeeded, what, message);
    }

    /// Number of entries with this outcome.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.entries.iter().filter(|e| e.outcome == outcome).count()
    }

    /// Whether any entry is a warning (approximated or dropped).
    pub fn has_warnings(&self) -> bool {
        self.entries.iter().any(|e| e.outcome.is_warning())
    }

    /// Entries whose `what` or `message` contains `needle` (for tests and
    /// tooling).
    pub fn find<'a>(&'a self, needle: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.what.contains(needle) || e.message.contains(needle))
    }

    /// The one-line summary: `12 translated, 3 approximated, 4 dropped, 5 not needed`.
    pub fn summary(&self) -> String {
        format!(
            "{} translated, {} approximated, {} dropped, {} not needed",
            self.count(Outcome::Translated),
            self.count(Outcome::Approximated),
            self.count(Outcome::Dropped),
            self.count(Outcome::NotNeeded)
        )
    }
}

impl fmt::Display for Report {
    /// Groups the entries by outcome (translated, approximated, dropped, not
    /// needed), each line `FILE:LINE: WHAT: MESSAGE`, then the summary line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for outcome in [
            Outcome::Translated,
            Outcome::Approximated,
            Outcome::Dropped,
            Outcome::NotNeeded,
        ] {
            let n = self.count(outcome);
            if n == 0 {
                continue;
            }
            writeln!(f, "{} ({n}):", outcome.label())?;
            for e in self.entries.iter().filter(|e| e.outcome == outcome) {
                writeln!(f, "  {}: {}: {}", e.src, e.what, e.message)?;
            }
        }
        writeln!(f, "summary: {}", self.summary())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_counts() {
        let mut r = Report::default();
        let s = Src::new("a.conf", 3);
        r.translated(&s, "expire.url", "expires.url");
        r.dropped(&s, "fastcgi.server", "no FastCGI");
        r.dropped(&s, "fastcgi.server", "no FastCGI");
        assert_eq!(r.entries.len(), 2);
        assert!(r.has_warnings());
        let text = r.to_string();
        assert!(text.contains("translated (1):\n  a.conf:3: expire.url: expires.url"));
        assert!(text.contains("dropped (1):"));
        assert!(text.ends_with("summary: 1 translated, 0 approximated, 1 dropped, 0 not needed\n"));
    }

    /// A weakening is a dropped entry whose message starts with `WEAKER: `.
    #[test]
    fn weaker_is_a_marked_drop() {
        let mut r = Report::default();
        let s = Src::new("a.conf", 4);
        r.weaker(&s, "fastcgi.server", "served without the check");
        r.dropped(&s, "ssi.extension", "not supported");
        assert_eq!(r.count(Outcome::Dropped), 2);
        let w: Vec<_> = r.entries.iter().filter(|e| e.is_weaker()).collect();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].message, "WEAKER: served without the check");
        assert!(r
            .to_string()
            .contains("  a.conf:4: fastcgi.server: WEAKER: served without the check\n"));
    }
}
