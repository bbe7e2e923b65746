//! The text `tessera explain` prints (`--json` prints the same data as JSON).

use std::fmt::{self, Display, Write};

use super::{Explanation, ModuleUse};

/// `FILE:LINE`, or `FILE` when the line is unknown.
fn at(file: &str, line: Option<usize>) -> String {
    match line {
        Some(l) => format!("{file}:{l}"),
        None => file.to_owned(),
    }
}

impl Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.config.as_str();
        let r = &self.request;
        writeln!(
            f,
            "request: {} {} (Host: {}) from {} on listener {}{}",
            r.method,
            r.target,
            r.host.as_deref().unwrap_or("none"),
            r.client.as_deref().unwrap_or("?"),
            r.listener,
            if r.tls { " (TLS)" } else { "" }
        )?;
        if let Some(why) = &self.refused {
            writeln!(f, "refused: {why}")?;
        }
        let v = &self.vhost;
        let why = match (v.kind, &v.name) {
            ("exact", Some(n)) => format!("exact name \"{n}\""),
            ("wildcard", Some(n)) => format!("wildcard: the host ends with \"{n}\""),
            ("regex", Some(n)) => format!("regex \"~{n}\""),
            ("no-host", _) => "the default vhost (no host to match)".to_owned(),
            _ => "the default vhost (no name matched the host)".to_owned(),
        };
        writeln!(f, "vhost: \"{}\" ({}): {why}", v.label, at(file, v.line))?;
        for c in &v.comments {
            writeln!(f, "  # {c}")?;
        }
        for (i, p) in self.rewrites.iter().enumerate() {
            writeln!(
                f,
                "rewrite {}: the path became {p}; rules resolved again",
                i + 1
            )?;
        }
        writeln!(f, "path: {}", self.path)?;
        if self.rules.is_empty() {
            writeln!(f, "rules: none")?;
        } else {
            writeln!(f, "rules, in order:")?;
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let fin = if rule.is_final { "final" } else { "not final" };
            write!(
                f,
                "  {}. \"{}\" ({}, {fin}): {}",
                i + 1,
                rule.name,
                at(file, rule.line),
                rule.outcome
            )?;
            match &rule.decided_by {
                Some(d) if rule.outcome == "matched" && rule.is_final => {
                    writeln!(f, ", by {d}; later rules are not evaluated")?
                }
                Some(d) => writeln!(f, ", by {d}")?,
                None => writeln!(f)?,
            }
            if rule.decided_by.is_some() {
                for c in &rule.from {
                    writeln!(f, "     # {c}")?;
                }
            }
        }
        writeln!(f, "modules, in pipeline order:")?;
        for m in &self.modules {
            writeln!(f, "  {}", module_line(m, file))?;
            for c in &m.from {
                writeln!(f, "      # {c}")?;
            }
            if !m.table.is_null() {
                writeln!(f, "      {}", m.table)?;
            }
        }
        writeln!(f, "phases:")?;
        let p = &self.phases;
        for (name, list) in [
            ("request", &p.request),
            ("content", &p.content),
            ("response", &p.response),
            ("log", &p.log),
        ] {
            let shown = if list.is_empty() {
                "-".to_owned()
            } else {
                list.join(" -> ")
            };
            writeln!(f, "  {name:<9}{shown}")?;
        }
        let a = &self.answer;
        let mut by = a.by.clone();
        if let Some(ph) = a.phase {
            let _ = write!(by, " ({ph} phase)");
        }
        match &a.detail {
            Some(d) => writeln!(f, "answer: {by}: {d}")?,
            None => writeln!(f, "answer: {by}")?,
        }
        if a.back_end {
            writeln!(
                f,
                "  status and headers come from the back end (not contacted by explain)"
            )?;
        }
        if let Some(s) = a.status {
            let reason = actix_web::http::StatusCode::from_u16(s)
                .ok()
                .and_then(|c| c.canonical_reason())
                .unwrap_or("");
            writeln!(f, "  {s} {reason}")?;
            for (k, v) in &a.headers {
                writeln!(f, "  {k}: {v}")?;
            }
        }
        Ok(())
    }
}

/// `expires  response  rule "docs" (server.toml:211), inherited from the
/// vhost's table (server.toml:131)`.
fn module_line(m: &ModuleUse, file: &str) -> String {
    let phases = if m.phases.is_empty() {
        "no hooks".to_owned()
    } else {
        m.phases.join(", ")
    };
    let origin = match (m.source, &m.rule) {
        ("rule", Some(r)) => {
            let mut s = format!("rule \"{r}\" table ({})", at(file, m.line));
            match (m.inherit, m.vhost_line) {
                (Some("inherited"), Some(l)) => {
                    let _ = write!(
                        s,
                        ", unset keys inherited from the vhost's table (line {l})"
                    );
                }
                (Some("merged"), Some(l)) => {
                    let _ = write!(s, ", merged into the vhost's table (line {l})");
                }
                _ => s.push_str(", replaces the vhost's table"),
            }
            s
        }
        _ if m.table.is_null() => {
            format!("vhost, defaults (listed in modules, {})", at(file, m.line))
        }
        _ => format!("vhost table ({})", at(file, m.line)),
    };
    format!("{:<12} {:<20} {origin}", m.name, format!("[{phases}]"))
}
