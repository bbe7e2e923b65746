//! The lighttpd 1.4 configuration parser and evaluator (after lighttpd's
//! `src/configparser.y` and `src/configfile.c`).
//!
//! Values are evaluated while parsing, as lighttpd does: variables (`var.x`, a
//! bare key `x`, any option assigned earlier in this or an enclosing block,
//! `env.X`), `+` (string concatenation, integer addition, array merge), and
//! `+=`, which copies the value of the nearest enclosing block *as it stands at
//! that point of the file* and appends to it. Includes are textual and resolved
//! against the main file's directory; globs are expanded in sorted order.
//! `include_shell` is never executed: the Debian helpers are understood
//! (`create-mime.conf.pl`, `create-mime.assign.pl`, `include-conf-enabled.pl`,
//! `use-ipv6.pl`), anything else is reported.

use std::path::{Path, PathBuf};

use super::glob::{glob, is_glob};
use super::lexer::{tokenize, Tok, Token};
use super::value::{CondOp, Context, Note, ParseOptions, Parsed, RawCond, Setting, Val};
use crate::error::ImportError;
use crate::report::{Outcome, Src};

/// Deepest include nesting accepted.
pub(crate) const MAX_INCLUDE_DEPTH: usize = 32;

/// Parses the file `path` and everything it includes.
///
/// # Errors
/// [`ImportError`]: the main file cannot be read, a syntax error, an undefined
/// variable, a type error in `+`, a duplicate assignment in one context, an
/// include loop.
pub(crate) fn parse_file(path: &Path, opts: &ParseOptions) -> Result<Parsed, ImportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ImportError::Io {
        path: path.to_owned(),
        source: e,
    })?;
    let basedir = path
        .parent()
        .map(|p| {
            if p.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                p.to_owned()
            }
        })
        .unwrap_or_else(|| PathBuf::from("."));
    parse_text(&path.display().to_string(), &text, &basedir, opts)
}

/// Parses `text` as the main file `name` with includes relative to `basedir`.
///
/// # Errors
/// As [`parse_file`].
pub(crate) fn parse_text(
    name: &str,
    text: &str,
    basedir: &Path,
    opts: &ParseOptions,
) -> Result<Parsed, ImportError> {
    let mut p = Parser {
        contexts: vec![Context {
            parent: None,
            cond: None,
            negs: Vec::new(),
            settings: Vec::new(),
            src: Src::new(name, 1),
            end_line: 0,
        }],
        notes: Vec::new(),
        basedir: basedir.to_owned(),
        files: Vec::new(),
        opts: opts.clone(),
        depth: 0,
        undefined: None,
    };
    p.parse_source(name, text, 0)?;
    Ok(Parsed {
        contexts: p.contexts,
        notes: p.notes,
        files: p.files,
    })
}

struct Parser {
    contexts: Vec<Context>,
    notes: Vec<Note>,
    basedir: PathBuf,
    files: Vec<String>,
    opts: ParseOptions,
    depth: usize,
    /// Set when an expression failed on an undefined variable (the statement
    /// is then dropped with a note instead of failing the import).
    undefined: Option<String>,
}

/// A cursor over one file's tokens.
struct Cursor<'a> {
    file: &'a str,
    toks: &'a [Token],
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.kind)
    }
    fn peek_at(&self, n: usize) -> Option<&Tok> {
        self.toks.get(self.pos + n).map(|t| &t.kind)
    }
    fn line(&self) -> u32 {
        self.toks
            .get(self.pos)
            .or_else(|| self.toks.last())
            .map_or(1, |t| t.line)
    }
    fn src(&self) -> Src {
        Src::new(self.file, self.line())
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.kind.clone());
        self.pos += 1;
        t
    }
    fn err(&self, msg: impl Into<String>) -> ImportError {
        ImportError::Parse {
            file: self.file.to_owned(),
            line: self.line(),
            message: msg.into(),
        }
    }
    fn expect(&mut self, want: &Tok, what: &str) -> Result<(), ImportError> {
        match self.peek() {
            Some(t) if t == want => {
                self.pos += 1;
                Ok(())
            }
            Some(t) => Err(self.err(format!("expected {what}, found {}", show_tok(t)))),
            None => Err(self.err(format!("expected {what} at the end of the file"))),
        }
    }
    fn skip_eol(&mut self) {
        while self.peek() == Some(&Tok::Eol) {
            self.pos += 1;
        }
    }
}

fn show_tok(t: &Tok) -> String {
    match t {
        Tok::Str(s) => format!("\"{s}\""),
        Tok::Int(i) => i.to_string(),
        Tok::Key(k) => k.clone(),
        Tok::Cond(c) => format!("${c}"),
        Tok::LParen => "'('".into(),
        Tok::RParen => "')'".into(),
        Tok::LBrace => "'{'".into(),
        Tok::RBrace => "'}'".into(),
        Tok::LBracket => "'['".into(),
        Tok::RBracket => "']'".into(),
        Tok::Comma => "','".into(),
        Tok::Arrow => "'=>'".into(),
        Tok::Assign => "'='".into(),
        Tok::Append => "'+='".into(),
        Tok::Force => "':='".into(),
        Tok::Plus => "'+'".into(),
        Tok::Eq => "'=='".into(),
        Tok::Ne => "'!='".into(),
        Tok::Re => "'=~'".into(),
        Tok::NotRe => "'!~'".into(),
        Tok::Prefix => "'=^'".into(),
        Tok::Suffix => "'=$'".into(),
        Tok::Eol => "the end of the line".into(),
    }
}

fn is_else(t: Option<&Tok>) -> bool {
    matches!(t, Some(Tok::Key(k)) if matches!(k.as_str(), "else" | "elif" | "elsif" | "elseif"))
}

impl Parser {
    fn parse_source(&mut self, name: &str, text: &str, ctx: usize) -> Result<(), ImportError> {
        self.files.push(name.to_owned());
        let toks = tokenize(name, text)?;
        let mut cur = Cursor {
            file: name,
            toks: &toks,
            pos: 0,
        };
        self.parse_block(&mut cur, ctx, true)?;
        Ok(())
    }

    /// Parses statements into context `ctx` until `}` (consumed) or, at the top
    /// of a file, the end of the tokens.
    fn parse_block(
        &mut self,
        cur: &mut Cursor<'_>,
        ctx: usize,
        top: bool,
    ) -> Result<u32, ImportError> {
        loop {
            let Some(tok) = cur.peek().cloned() else {
                if top {
                    return Ok(cur.line());
                }
                return Err(cur.err("missing '}' at the end of the file"));
            };
            match tok {
                Tok::Eol => {
                    cur.pos += 1;
                }
                Tok::RBrace => {
                    if top {
                        return Err(cur.err("'}' without a block"));
                    }
                    let line = cur.line();
                    cur.pos += 1;
                    return Ok(line);
                }
                Tok::Key(k) if k == "include" || k == "include_shell" => {
                    let src = cur.src();
                    cur.pos += 1;
                    let v = self.parse_expr(cur, ctx)?;
                    let Val::Str(arg) = v else {
                        return Err(cur.err(format!("{k} needs a string")));
                    };
                    self.end_statement(cur)?;
                    if k == "include" {
                        self.include(&src, &arg, ctx)?;
                    } else {
                        self.include_shell(&src, &arg, ctx)?;
                    }
                }
                Tok::Key(k) if k == "global" && cur.peek_at(1) != Some(&Tok::Assign) => {
                    cur.pos += 1;
                    cur.skip_eol();
                    cur.expect(&Tok::LBrace, "'{' after global")?;
                    if ctx != 0 {
                        return Err(cur.err("global { } is only allowed at the top level"));
                    }
                    self.parse_block(cur, 0, false)?;
                }
                Tok::Key(k) if is_else(Some(&Tok::Key(k.clone()))) => {
                    return Err(cur.err("else without a preceding condition block"));
                }
                Tok::Key(k) if k == "if" && matches!(cur.peek_at(1), Some(Tok::Cond(_))) => {
                    cur.pos += 1;
                }
                Tok::Key(_) => self.parse_assignment(cur, ctx)?,
                Tok::Cond(_) => self.parse_conditional(cur, ctx)?,
                other => {
                    return Err(cur.err(format!("unexpected {}", show_tok(&other))));
                }
            }
        }
    }

    fn end_statement(&mut self, cur: &mut Cursor<'_>) -> Result<(), ImportError> {
        match cur.peek() {
            None | Some(Tok::Eol) => {
                cur.pos += 1;
                Ok(())
            }
            Some(Tok::RBrace) => Ok(()),
            Some(t) => Err(cur.err(format!(
                "expected the end of the statement, found {}",
                show_tok(t)
            ))),
        }
    }

    fn parse_assignment(&mut self, cur: &mut Cursor<'_>, ctx: usize) -> Result<(), ImportError> {
        let src = cur.src();
        let Some(Tok::Key(mut key)) = cur.next() else {
            unreachable!("called on a key")
        };
        if !key.contains('.') {
            key = format!("var.{key}");
        }
        if key.starts_with("env.") {
            return Err(cur.err(format!("{key}: env.* variables cannot be assigned")));
        }
        let op = cur.next();
        self.undefined = None;
        let val = match self.parse_expr(cur, ctx) {
            Ok(v) => v,
            Err(e) => {
                let Some(var) = self.undefined.take() else {
                    return Err(e);
                };
                // lighttpd refuses this; a fragment imported on its own
                // (conf.d/*.conf) often uses variables of the main file.
                while !matches!(cur.peek(), None | Some(Tok::Eol) | Some(Tok::RBrace)) {
                    cur.pos += 1;
                }
                self.note(
                    &src,
                    Outcome::Dropped,
                    &key,
                    format!("{var} is not defined here (lighttpd refuses this; define it, or import the main file that includes this one)"),
                );
                return self.end_statement(cur);
            }
        };
        self.end_statement(cur)?;
        match op {
            Some(Tok::Assign) => {
                if self.contexts[ctx].get(&key).is_some() {
                    return Err(ImportError::Parse {
                        file: src.file.clone(),
                        line: src.line,
                        message: format!(
                            "duplicate config variable {key} in one block (lighttpd refuses this; use := to replace)"
                        ),
                    });
                }
                self.set(ctx, key, val, src);
            }
            Some(Tok::Force) => self.set(ctx, key, val, src),
            Some(Tok::Append) => {
                let base = self.lookup(ctx, &key).map(|s| s.val.clone());
                let merged = match base {
                    Some(b) => merge(b, val).map_err(|m| ImportError::Parse {
                        file: src.file.clone(),
                        line: src.line,
                        message: format!("{key} +=: {m}"),
                    })?,
                    None => val,
                };
                self.set(ctx, key, merged, src);
            }
            Some(t) => {
                return Err(ImportError::Parse {
                    file: src.file.clone(),
                    line: src.line,
                    message: format!("expected =, += or := after {key}, found {}", show_tok(&t)),
                })
            }
            None => return Err(cur.err(format!("{key}: missing value"))),
        }
        Ok(())
    }

    fn set(&mut self, ctx: usize, key: String, val: Val, src: Src) {
        let c = &mut self.contexts[ctx];
        match c.settings.iter_mut().find(|s| s.key == key) {
            Some(s) => {
                s.val = val;
                s.src = src;
            }
            None => c.settings.push(Setting { key, val, src }),
        }
    }

    /// The nearest setting of `key` in `ctx` or an enclosing context.
    fn lookup(&self, ctx: usize, key: &str) -> Option<&Setting> {
        let mut c = Some(ctx);
        while let Some(i) = c {
            if let Some(s) = self.contexts[i].get(key) {
                return Some(s);
            }
            c = self.contexts[i].parent;
        }
        None
    }

    fn parse_expr(&mut self, cur: &mut Cursor<'_>, ctx: usize) -> Result<Val, ImportError> {
        let mut v = self.parse_term(cur, ctx)?;
        while cur.peek() == Some(&Tok::Plus) {
            cur.pos += 1;
            let rhs = self.parse_term(cur, ctx)?;
            v = merge(v, rhs).map_err(|m| cur.err(m))?;
        }
        Ok(v)
    }

    fn parse_term(&mut self, cur: &mut Cursor<'_>, ctx: usize) -> Result<Val, ImportError> {
        match cur.next() {
            Some(Tok::Str(s)) => {
                if matches!(cur.peek(), Some(Tok::Str(_))) {
                    return Err(cur.err("two strings side by side: join them with +"));
                }
                Ok(Val::Str(s))
            }
            Some(Tok::Int(i)) => Ok(Val::Int(i)),
            Some(Tok::Key(k)) => self.variable(cur, ctx, &k),
            Some(Tok::LParen) => {
                let mut items: Vec<(Option<String>, Val)> = Vec::new();
                loop {
                    match cur.peek() {
                        Some(Tok::RParen) => {
                            cur.pos += 1;
                            break;
                        }
                        Some(Tok::Comma) => {
                            cur.pos += 1;
                            continue;
                        }
                        None => return Err(cur.err("missing ')'")),
                        _ => {}
                    }
                    let first = self.parse_expr(cur, ctx)?;
                    if cur.peek() == Some(&Tok::Arrow) {
                        cur.pos += 1;
                        let Some(k) = first.as_string() else {
                            return Err(cur.err("an array key must be a string"));
                        };
                        let v = self.parse_expr(cur, ctx)?;
                        if items
                            .iter()
                            .any(|(x, _)| x.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(&k)))
                        {
                            return Err(cur.err(format!(
                                "duplicate array key \"{k}\" (lighttpd: please get rid of the duplicate entry)"
                            )));
                        }
                        items.push((Some(k), v));
                    } else {
                        items.push((None, first));
                    }
                    match cur.peek() {
                        Some(Tok::Comma) => cur.pos += 1,
                        Some(Tok::RParen) => {}
                        Some(t) => {
                            return Err(cur.err(format!(
                                "expected ',' or ')' in an array, found {}",
                                show_tok(t)
                            )))
                        }
                        None => return Err(cur.err("missing ')'")),
                    }
                }
                Ok(Val::Arr(items))
            }
            Some(t) => Err(cur.err(format!("expected a value, found {}", show_tok(&t)))),
            None => Err(cur.err("expected a value at the end of the file")),
        }
    }

    fn variable(&mut self, cur: &Cursor<'_>, ctx: usize, k: &str) -> Result<Val, ImportError> {
        if let Some(name) = k.strip_prefix("env.") {
            // Always fatal, as in lighttpd: without it a document root
            // would silently become another one.
            return std::env::var(name).map(Val::Str).map_err(|_| {
                cur.err(format!(
                    "{k}: the environment variable {name} is not set (lighttpd refuses to start)"
                ))
            });
        }
        let key = if k.contains('.') {
            k.to_owned()
        } else {
            format!("var.{k}")
        };
        if let Some(s) = self.lookup(ctx, &key) {
            return Ok(s.val.clone());
        }
        match key.as_str() {
            "var.CWD" => Ok(Val::Str(
                std::env::current_dir()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            )),
            "var.PID" => Ok(Val::Int(i64::from(std::process::id()))),
            _ => {
                self.undefined = Some(k.to_owned());
                Err(cur.err(format!("{k}: undefined variable")))
            }
        }
    }

    fn parse_conditional(&mut self, cur: &mut Cursor<'_>, ctx: usize) -> Result<(), ImportError> {
        let mut chain: Vec<RawCond> = Vec::new();
        let mut cond = Some(self.parse_cond(cur, ctx)?);
        loop {
            let src = cond.as_ref().map_or_else(|| cur.src(), |c| c.src.clone());
            cur.skip_eol();
            cur.expect(&Tok::LBrace, "'{' after the condition")?;
            let id = self.contexts.len();
            self.contexts.push(Context {
                parent: Some(ctx),
                cond: cond.clone(),
                negs: chain.clone(),
                settings: Vec::new(),
                src,
                end_line: 0,
            });
            let end = self.parse_block(cur, id, false)?;
            self.contexts[id].end_line = end;
            let Some(c) = cond.take() else {
                // A bare else ends the chain; another else is an error.
                let save = cur.pos;
                cur.skip_eol();
                if is_else(cur.peek()) {
                    return Err(cur.err("else after a bare else"));
                }
                cur.pos = save;
                return Ok(());
            };
            chain.push(c);
            let save = cur.pos;
            cur.skip_eol();
            if !is_else(cur.peek()) {
                cur.pos = save;
                return Ok(());
            }
            cur.pos += 1;
            if matches!(cur.peek(), Some(Tok::Key(k)) if k == "if") {
                cur.pos += 1;
            }
            cond = match cur.peek() {
                Some(Tok::Cond(_)) => Some(self.parse_cond(cur, ctx)?),
                _ => None,
            };
        }
    }

    fn parse_cond(&mut self, cur: &mut Cursor<'_>, ctx: usize) -> Result<RawCond, ImportError> {
        let src = cur.src();
        let Some(Tok::Cond(field)) = cur.next() else {
            return Err(cur.err("expected a condition such as $HTTP[\"url\"]"));
        };
        cur.expect(&Tok::LBracket, "'['")?;
        let key = match cur.next() {
            Some(Tok::Str(s)) => s,
            _ => return Err(cur.err(format!("expected a quoted name in ${field}[…]"))),
        };
        cur.expect(&Tok::RBracket, "']'")?;
        let op = match cur.next() {
            Some(Tok::Eq) => CondOp::Eq,
            Some(Tok::Ne) => CondOp::Ne,
            Some(Tok::Re) => CondOp::Re,
            Some(Tok::NotRe) => CondOp::NotRe,
            Some(Tok::Prefix) => CondOp::Prefix,
            Some(Tok::Suffix) => CondOp::Suffix,
            _ => return Err(cur.err("expected ==, !=, =~, !~, =^ or =$ in a condition")),
        };
        let v = self.parse_expr(cur, ctx)?;
        let Some(value) = v.as_string() else {
            return Err(cur.err("a condition compares with a string"));
        };
        Ok(RawCond {
            field,
            key,
            op,
            value,
            src,
        })
    }

    fn note(&mut self, src: &Src, outcome: Outcome, what: &str, message: String) {
        self.notes.push(Note {
            src: src.clone(),
            outcome,
            what: what.to_owned(),
            message,
        });
    }

    fn include(&mut self, src: &Src, arg: &str, ctx: usize) -> Result<(), ImportError> {
        let p = Path::new(arg);
        let full = if p.is_absolute() {
            p.to_owned()
        } else {
            self.basedir.join(p)
        };
        let files = if is_glob(arg) {
            let found = glob(&full);
            if found.is_empty() {
                self.note(
                    src,
                    Outcome::NotNeeded,
                    &format!("include \"{arg}\""),
                    "the pattern matches no file (lighttpd accepts this)".into(),
                );
            }
            found
        } else {
            vec![full.clone()]
        };
        for f in files {
            // A file that cannot be read is fatal, as in lighttpd (a glob
            // matching nothing is not).
            let text = std::fs::read_to_string(&f).map_err(|e| ImportError::Parse {
                file: src.file.clone(),
                line: src.line,
                message: format!(
                    "include \"{arg}\": {}: {e} (lighttpd refuses to start; copy the file to this machine, or remove the include, and import again)",
                    f.display()
                ),
            })?;
            self.include_text(&f.display().to_string(), &text, ctx)?;
            self.note(
                src,
                Outcome::Translated,
                &format!("include \"{arg}\""),
                format!("read {}", f.display()),
            );
        }
        Ok(())
    }

    fn include_text(&mut self, name: &str, text: &str, ctx: usize) -> Result<(), ImportError> {
        if self.depth >= MAX_INCLUDE_DEPTH {
            return Err(ImportError::IncludeDepth {
                file: name.to_owned(),
                depth: MAX_INCLUDE_DEPTH,
            });
        }
        self.depth += 1;
        let r = self.parse_source(name, text, ctx);
        self.depth -= 1;
        r
    }

    fn include_shell(&mut self, src: &Src, cmd: &str, ctx: usize) -> Result<(), ImportError> {
        let what = format!("include_shell \"{cmd}\"");
        let mut words = cmd.split_whitespace();
        let prog = words.next().unwrap_or("");
        let base = prog.rsplit('/').next().unwrap_or(prog);
        match base {
            "create-mime.conf.pl" | "create-mime.assign.pl" => {
                let table = &self.opts.mime_types.clone();
                match std::fs::read_to_string(table) {
                    Ok(t) => {
                        let text = super::mime::create_mime_conf(&t);
                        self.include_text(&format!("<include_shell {base}>"), &text, ctx)?;
                        self.note(
                            src,
                            Outcome::Translated,
                            &what,
                            format!(
                                "not executed: mimetype.assign built from {} as the Debian helper does",
                                table.display()
                            ),
                        );
                    }
                    Err(e) => self.note(
                        src,
                        Outcome::Dropped,
                        &what,
                        format!(
                            "{}: {e}; Tessera's built-in MIME types are used instead",
                            table.display()
                        ),
                    ),
                }
            }
            "include-conf-enabled.pl" => {
                let dir = words.next().unwrap_or("/etc/lighttpd/");
                let pattern = format!("{}/conf-enabled/*.conf", dir.trim_end_matches('/'));
                self.note(
                    src,
                    Outcome::Translated,
                    &what,
                    format!("not executed: read as include \"{pattern}\""),
                );
                self.include(src, &pattern, ctx)?;
            }
            "use-ipv6.pl" => {
                let port: u16 = words.next().and_then(|p| p.parse().ok()).unwrap_or(80);
                let text = if port == 443 {
                    format!("$SERVER[\"socket\"] == \"[::]:{port}\" {{\nssl.engine = \"enable\"\n}}\n")
                } else {
                    format!("$SERVER[\"socket\"] == \"[::]:{port}\" {{ }}\n")
                };
                self.note(
                    src,
                    Outcome::Translated,
                    &what,
                    format!("not executed: read as $SERVER[\"socket\"] == \"[::]:{port}\" (an IPv6 listener)"),
                );
                self.include_text(&format!("<include_shell {base} {port}>"), &text, ctx)?;
            }
            _ => self.note(
                src,
                Outcome::Dropped,
                &what,
                "not executed (the importer never runs commands): run it yourself and include its output with include \"FILE\", then import again".into(),
            ),
        }
        Ok(())
    }
}

/// lighttpd's `+`: string + string or integer concatenates, integer + integer
/// adds, array + array appends (a keyed entry whose key is already present is
/// an error unless the values are equal).
fn merge(a: Val, b: Val) -> Result<Val, String> {
    Ok(match (a, b) {
        (Val::Str(x), Val::Str(y)) => Val::Str(x + &y),
        (Val::Str(x), Val::Int(y)) => Val::Str(format!("{x}{y}")),
        (Val::Int(x), Val::Str(y)) => Val::Str(format!("{x}{y}")),
        (Val::Int(x), Val::Int(y)) => Val::Int(x.saturating_add(y)),
        (Val::Arr(mut x), Val::Arr(y)) => {
            for (k, v) in y {
                if let Some(k) = &k {
                    if let Some((_, old)) = x
                        .iter()
                        .find(|(ok, _)| ok.as_deref().is_some_and(|ok| ok.eq_ignore_ascii_case(k)))
                    {
                        if *old == v {
                            continue;
                        }
                        return Err(format!(
                            "duplicate key \"{k}\" with a different value (lighttpd refuses this)"
                        ));
                    }
                }
                x.push((k, v));
            }
            Val::Arr(x)
        }
        (Val::Arr(_), _) | (_, Val::Arr(_)) => {
            return Err("cannot add an array and a string or integer".into())
        }
    })
}

#[cfg(test)]
mod tests;
