//! The lighttpd 1.4 tokenizer (after `config_tokenizer()` in lighttpd's
//! `src/configfile.c`).
//!
//! - `#` starts a comment to the end of the line, outside strings.
//! - Spaces, tabs, carriage returns and U+00A0 separate tokens. A newline ends a
//!   statement, except inside `( … )`, where newlines are free.
//! - Strings are `"…"`; the only escape is `\"`; any other backslash is kept, so
//!   `"\.css$"` holds a backslash and a dot.
//! - Integers are decimal digits; keys are `[A-Za-z0-9._-]+` starting with a
//!   letter or `_`; `$HTTP`, `$SERVER`, `$REQUEST_HEADER`, `$PHYSICAL`, `$ENV`
//!   start a condition.

use crate::error::ImportError;

/// A token and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) kind: Tok,
    pub(crate) line: u32,
}

/// Token kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    /// `"…"` with `\"` unescaped.
    Str(String),
    /// Decimal digits.
    Int(i64),
    /// A key or reserved word (`include`, `else`, …).
    Key(String),
    /// `$HTTP`, `$SERVER`, … (without the `$`).
    Cond(String),
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Comma,
    /// `=>`
    Arrow,
    /// `=`
    Assign,
    /// `+=`
    Append,
    /// `:=`
    Force,
    /// `+`
    Plus,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `=~`
    Re,
    /// `!~`
    NotRe,
    /// `=^`
    Prefix,
    /// `=$`
    Suffix,
    /// End of a statement: a newline outside parentheses, or `;`.
    Eol,
}

/// Splits `text` (the contents of `file`) into tokens.
///
/// # Errors
/// [`ImportError::Parse`] naming file and line: an unterminated string, a stray
/// character, an unbalanced `)`.
pub(crate) fn tokenize(file: &str, text: &str) -> Result<Vec<Token>, ImportError> {
    let err = |line: u32, msg: String| ImportError::Parse {
        file: file.to_owned(),
        line,
        message: msg,
    };
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line: u32 = 1;
    let mut depth: i32 = 0;
    let push = |out: &mut Vec<Token>, kind: Tok, line: u32| out.push(Token { kind, line });
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                if depth == 0 && !matches!(out.last(), Some(Token { kind: Tok::Eol, .. }) | None) {
                    push(&mut out, Tok::Eol, line);
                }
                line += 1;
                i += 1;
            }
            ' ' | '\t' | '\r' | '\u{a0}' => i += 1,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ';' => {
                push(&mut out, Tok::Eol, line);
                i += 1;
            }
            '"' => {
                let start_line = line;
                let mut s = String::new();
                i += 1;
                loop {
                    let Some(&ch) = chars.get(i) else {
                        return Err(err(start_line, "unterminated string".into()));
                    };
                    if ch == '\\' && chars.get(i + 1) == Some(&'"') {
                        s.push('"');
                        i += 2;
                        continue;
                    }
                    if ch == '"' {
                        i += 1;
                        break;
                    }
                    if ch == '\n' {
                        line += 1;
                    }
                    s.push(ch);
                    i += 1;
                }
                push(&mut out, Tok::Str(s), start_line);
            }
            '(' => {
                depth += 1;
                push(&mut out, Tok::LParen, line);
                i += 1;
            }
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(err(line, "unbalanced ')'".into()));
                }
                push(&mut out, Tok::RParen, line);
                i += 1;
            }
            '{' => {
                push(&mut out, Tok::LBrace, line);
                i += 1;
            }
            '}' => {
                push(&mut out, Tok::RBrace, line);
                i += 1;
            }
            '[' => {
                push(&mut out, Tok::LBracket, line);
                i += 1;
            }
            ']' => {
                push(&mut out, Tok::RBracket, line);
                i += 1;
            }
            ',' => {
                push(&mut out, Tok::Comma, line);
                i += 1;
            }
            '=' | '!' | '+' | ':' => {
                let next = chars.get(i + 1).copied();
                let (kind, len) = match (c, next) {
                    ('=', Some('>')) => (Tok::Arrow, 2),
                    ('=', Some('=')) => (Tok::Eq, 2),
                    ('=', Some('~')) => (Tok::Re, 2),
                    ('=', Some('^')) => (Tok::Prefix, 2),
                    ('=', Some('$')) => (Tok::Suffix, 2),
                    ('=', _) => (Tok::Assign, 1),
                    ('!', Some('=')) => (Tok::Ne, 2),
                    ('!', Some('~')) => (Tok::NotRe, 2),
                    ('+', Some('=')) => (Tok::Append, 2),
                    ('+', _) => (Tok::Plus, 1),
                    (':', Some('=')) => (Tok::Force, 2),
                    _ => return Err(err(line, format!("unexpected character '{c}'"))),
                };
                push(&mut out, kind, line);
                i += len;
            }
            '$' => {
                let start = i + 1;
                let mut j = start;
                while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                    j += 1;
                }
                if j == start {
                    return Err(err(line, "'$' without a condition name".into()));
                }
                push(&mut out, Tok::Cond(chars[start..j].iter().collect()), line);
                i = j;
            }
            c if c.is_ascii_digit() => {
                let start = i;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
                // A key may start with digits only if letters follow (rare);
                // lighttpd reads digits as an integer.
                let s: String = chars[start..i].iter().collect();
                let n = s
                    .parse::<i64>()
                    .map_err(|_| err(line, format!("integer {s} is too large")))?;
                push(&mut out, Tok::Int(n), line);
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '.' | '_' | '-'))
                {
                    i += 1;
                }
                push(&mut out, Tok::Key(chars[start..i].iter().collect()), line);
            }
            c => return Err(err(line, format!("unexpected character '{c}'"))),
        }
    }
    if depth != 0 {
        return Err(err(line, "unbalanced '(' at the end of the file".into()));
    }
    if !matches!(out.last(), Some(Token { kind: Tok::Eol, .. })) {
        out.push(Token {
            kind: Tok::Eol,
            line,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Tok> {
        tokenize("t", s)
            .unwrap()
            .into_iter()
            .map(|t| t.kind)
            .collect()
    }

    #[test]
    fn strings_keep_backslashes() {
        assert_eq!(
            kinds(r#"a = "\.css$" # c"#),
            vec![
                Tok::Key("a".into()),
                Tok::Assign,
                Tok::Str(r"\.css$".into()),
                Tok::Eol
            ]
        );
        assert_eq!(kinds(r#""say \"hi\"""#)[0], Tok::Str(r#"say "hi""#.into()));
    }

    #[test]
    fn operators_and_newlines_in_parens() {
        let k = kinds("x += (\n \"a\" => 1,\n)\n$HTTP[\"url\"] =~ \"^/\" {\n}\n");
        assert_eq!(
            k,
            vec![
                Tok::Key("x".into()),
                Tok::Append,
                Tok::LParen,
                Tok::Str("a".into()),
                Tok::Arrow,
                Tok::Int(1),
                Tok::Comma,
                Tok::RParen,
                Tok::Eol,
                Tok::Cond("HTTP".into()),
                Tok::LBracket,
                Tok::Str("url".into()),
                Tok::RBracket,
                Tok::Re,
                Tok::Str("^/".into()),
                Tok::LBrace,
                Tok::Eol,
                Tok::RBrace,
                Tok::Eol,
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        let e = tokenize("f.conf", "a = 1\nb = \"x").unwrap_err();
        assert_eq!(e.to_string(), "f.conf:2: unterminated string");
        assert!(tokenize("f.conf", "a = )").is_err());
    }
}
