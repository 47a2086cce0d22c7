//! `NumPy` arrays and Python numbers to the core's types. The stored dtypes
//! are listed once ([`Held`]), and a dtype meets its key domain in one place
//! ([`with_keyed`]).

use numpy::{
    PyArray1, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray1, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use quarry_core::eval::Interval;
use quarry_core::key::{Key, KeyKind};
use quarry_core::scan::Values;

/// `array` as a read-only 1-D array of `K` (a type error if it is another dtype).
pub fn contiguous<'py, K: numpy::Element>(
    array: &Bound<'py, PyUntypedArray>,
) -> PyResult<PyReadonlyArray1<'py, K>> {
    let typed = array.cast::<PyArray1<K>>().map_err(|_| {
        PyTypeError::new_err(format!(
            "expected a 1-D {} array, got a {}-D {} array",
            numpy::dtype::<K>(array.py()),
            array.ndim(),
            array.dtype()
        ))
    })?;
    Ok(typed.readonly())
}

macro_rules! held {
    ($($t:ty => $v:ident),*) => {
        /// A `NumPy` array of any stored dtype, borrowed read-only for the length of a call.
        pub enum Held<'py> {
            $($v(PyReadonlyArray1<'py, $t>)),*
        }

        impl<'py> Held<'py> {
            pub fn new(array: &Bound<'py, PyUntypedArray>) -> PyResult<Self> {
                let py = array.py();
                let dtype = array.dtype();
                $(if dtype.is_equiv_to(&numpy::dtype::<$t>(py)) {
                    return Ok(Held::$v(contiguous::<$t>(array)?));
                })*
                Err(PyTypeError::new_err(format!("cannot scan dtype {dtype}")))
            }

            pub fn values(&self) -> PyResult<Values<'_>> {
                Ok(match self {
                    $(Held::$v(a) => Values::$v(a.as_slice()?)),*
                })
            }
        }
    };
}

held!(f32 => F32, f64 => F64, i8 => I8, i16 => I16, i32 => I32, i64 => I64,
      u8 => U8, u16 => U16, u32 => U32, u64 => U64);

/// `f` over the columns' values (each dtype checked and made contiguous).
pub fn with_values<R>(
    columns: &[Bound<'_, PyUntypedArray>],
    f: impl FnOnce(&[Values<'_>]) -> crate::errors::Result<R>,
) -> crate::errors::Result<R> {
    let held = columns
        .iter()
        .map(Held::new)
        .collect::<PyResult<Vec<_>>>()?;
    let values = held
        .iter()
        .map(Held::values)
        .collect::<PyResult<Vec<_>>>()?;
    f(&values)
}

/// `$body` with `$s` bound to the stored values' slice and `$k` to the key
/// type they are indexed and compared in (see `quarry_core::key`).
macro_rules! with_keyed {
    ($values:expr, $s:ident, $k:ident => $body:expr) => {{
        use quarry_core::scan::Values as V;
        match $values {
            V::F32($s) => with_keyed!(@ f64, $k, $body),
            V::F64($s) => with_keyed!(@ f64, $k, $body),
            V::I8($s) => with_keyed!(@ i64, $k, $body),
            V::I16($s) => with_keyed!(@ i64, $k, $body),
            V::I32($s) => with_keyed!(@ i64, $k, $body),
            V::I64($s) => with_keyed!(@ i64, $k, $body),
            V::U8($s) => with_keyed!(@ u64, $k, $body),
            V::U16($s) => with_keyed!(@ u64, $k, $body),
            V::U32($s) => with_keyed!(@ u64, $k, $body),
            V::U64($s) => with_keyed!(@ u64, $k, $body),
        }
    }};
    (@ $key:ty, $k:ident, $body:expr) => {{
        #[allow(dead_code)]
        type $k = $key;
        $body
    }};
}
pub(crate) use with_keyed;

/// `$body` with `$k` the key type of kind `$kind`.
macro_rules! with_kind {
    ($kind:expr, $k:ident => $body:expr) => {{
        use quarry_core::key::KeyKind as KK;
        match $kind {
            KK::F64 => with_keyed!(@ f64, $k, $body),
            KK::I64 => with_keyed!(@ i64, $k, $body),
            KK::U64 => with_keyed!(@ u64, $k, $body),
        }
    }};
}
pub(crate) use with_kind;

/// The key kind named `name` (as `KEY_KINDS` lists them).
pub fn kind_named(name: &str) -> PyResult<KeyKind> {
    KeyKind::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = KeyKind::ALL.iter().map(|k| k.name()).collect();
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown key kind {name:?}; the kinds are {}",
            known.join(", ")
        ))
    })
}

/// The key kind of an array that already holds keys (float64, int64 or uint64).
pub fn kind_of(array: &Bound<'_, PyUntypedArray>) -> PyResult<KeyKind> {
    let dtype = array.dtype();
    let py = array.py();
    KeyKind::ALL
        .into_iter()
        .find(|&kind| with_kind!(kind, K => dtype.is_equiv_to(&numpy::dtype::<K>(py))))
        .ok_or_else(|| {
            PyTypeError::new_err(format!(
                "expected a float64, int64 or uint64 array, got {dtype}"
            ))
        })
}

/// Python numbers to keys; an integer bound outside the domain is an error
/// (the planner clamps before it gets here).
pub trait ExtractKey: Key {
    fn extract_key(ob: &Bound<'_, PyAny>) -> PyResult<Self>;
}

macro_rules! extract_key {
    ($($t:ty),*) => {$(
        impl ExtractKey for $t {
            fn extract_key(ob: &Bound<'_, PyAny>) -> PyResult<Self> {
                ob.extract::<$t>()
            }
        }
    )*};
}
extract_key!(f64, i64, u64);

pub fn interval<K: ExtractKey>(
    lo: &Bound<'_, PyAny>,
    lo_incl: bool,
    hi: &Bound<'_, PyAny>,
    hi_incl: bool,
) -> PyResult<Interval<K>> {
    Ok(Interval {
        lo: K::extract_key(lo)?,
        lo_incl,
        hi: K::extract_key(hi)?,
        hi_incl,
    })
}
