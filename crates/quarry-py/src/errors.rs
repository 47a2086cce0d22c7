//! Errors on their way to Python. Binding functions return [`Result`], so `?`
//! works on the core's errors and on Python's alike; the conversion to an
//! exception happens once, here.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::PyErr;
use quarry_core::CoreError;

create_exception!(
    _core,
    CorruptBlockError,
    PyException,
    "Index bytes that do not parse."
);

/// An error raised by the core, or one Python (argument conversion, I/O) raised already.
pub enum Error {
    Core(CoreError),
    Python(PyErr),
}

pub type Result<T> = std::result::Result<T, Error>;

impl From<CoreError> for Error {
    fn from(err: CoreError) -> Self {
        Self::Core(err)
    }
}

impl From<PyErr> for Error {
    fn from(err: PyErr) -> Self {
        Self::Python(err)
    }
}

impl From<std::io::Error> for Error {
    fn from(err: std::io::Error) -> Self {
        Self::Python(err.into())
    }
}

impl From<numpy::AsSliceError> for Error {
    fn from(err: numpy::AsSliceError) -> Self {
        Self::Python(err.into())
    }
}

/// Corrupt index bytes raise `CorruptBlockError`; arguments that do not fit
/// together raise `ValueError`.
impl From<Error> for PyErr {
    fn from(err: Error) -> Self {
        match err {
            Error::Core(CoreError::Corrupt(msg)) => CorruptBlockError::new_err(msg),
            Error::Core(CoreError::Invalid(msg)) => PyValueError::new_err(msg),
            Error::Python(err) => err,
        }
    }
}
