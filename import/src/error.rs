//! Why an import failed (as opposed to the warnings of the [`crate::Report`]).

use std::path::PathBuf;

/// An import that could not produce a configuration. Each variant names the
/// file (and line, where there is one).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The main file or an include could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A syntax error, or a construct the source server itself refuses (an
    /// undefined variable, `+` between an array and a string, a bare `else`
    /// followed by another `else`).
    #[error("{file}:{line}: {message}")]
    Parse {
        /// The file, as opened.
        file: String,
        /// 1-based line.
        line: u32,
        /// What is wrong.
        message: String,
    },
    /// Includes nest deeper than 32 levels (an include loop).
    #[error("{file}: includes nest deeper than {depth} levels (an include loop?)")]
    IncludeDepth {
        /// The file that would have been included.
        file: String,
        /// The limit.
        depth: usize,
    },
    /// The source defines nothing to serve (no document root anywhere, no
    /// virtual server).
    #[error("{file}: {message}")]
    Empty {
        /// The main file.
        file: String,
        /// What is missing.
        message: String,
    },
}
