//! Errors of the core. Messages are short, lower-case and say what was wrong.

/// Everything that can go wrong in the core.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CoreError {
    /// Index bytes that do not parse: truncated, overwritten, or a checksum mismatch.
    #[error("corrupt index block: {0}")]
    Corrupt(String),
    /// A caller passed arguments that do not fit together.
    #[error("invalid argument: {0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, CoreError>;

pub(crate) fn corrupt<T>(msg: impl Into<String>) -> Result<T> {
    Err(CoreError::Corrupt(msg.into()))
}
