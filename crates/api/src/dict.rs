//! Reading a D-Bus `a{sv}` into a typed wire struct, the one way every
//! dictionary is read (the daemon reading Create's options, a client reading
//! Status). A serde `Deserializer` over zvariant's `Value`, so the struct's
//! field names are the only spelling of its keys.
//!
//! It is lenient where the interface documents it and strict everywhere
//! else: any integer type is accepted for an integer field (range-checked),
//! a variant boxed twice is unwrapped, and every other mismatch, unknown key
//! (for structs that deny them) or missing required key is an error whose
//! message starts with the path of the offending key (`port_mappings[0].host_port`).

use crate::error::Error;
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use std::collections::HashMap;
use std::fmt;
use zbus::zvariant::{OwnedValue, Value};

/// An `a{sv}` as it arrives.
pub type Dict = HashMap<String, OwnedValue>;
/// An `a{sv}` argument borrowed from its message: a method that takes it
/// holds no second copy of what a caller sent (up to 32 MiB).
pub type DictArg<'m> = HashMap<&'m str, Value<'m>>;

/// The longest string any podscope dictionary carries: an annotation's
/// value, which all of a pod's annotations together may not pass. A longer
/// one is refused as it is met, before it is copied.
pub const STRING_MAX: usize = crate::domain::config::ANNOTATIONS_TOTAL_MAX;

/// The values a dictionary may hold: owned, or borrowed from a message.
pub trait DictValue {
    fn as_value(&self) -> &Value<'_>;
}

impl DictValue for OwnedValue {
    fn as_value(&self) -> &Value<'_> {
        self
    }
}

impl DictValue for Value<'_> {
    fn as_value(&self) -> &Value<'_> {
        self
    }
}

/// Decode `d` as `T`. `root` names the argument in messages (`filter`,
/// `resources`); Create's options have none, so their keys stand alone.
pub fn from_dict<T: DeserializeOwned>(
    root: Option<&str>,
    d: &HashMap<impl AsRef<str>, impl DictValue>,
) -> Result<T, Error> {
    let entries = d.iter().map(|(k, v)| (Key::Str(k.as_ref()), v.as_value()));
    T::deserialize(MapDe {
        entries: entries.collect(),
    })
    .map_err(|e| {
        let e = match root {
            Some(r) => e.under(r),
            None => e,
        };
        Error::invalid(&e.path, e.msg)
    })
}

/// A decoding failure: where (`a.b[2].c`) and what.
#[derive(Debug)]
pub struct DecodeError {
    path: String,
    msg: String,
}

impl DecodeError {
    /// The error as seen from the dictionary holding `key`.
    fn under(mut self, key: &str) -> Self {
        self.path = match (self.path.is_empty(), self.path.starts_with('[')) {
            (true, _) => key.to_owned(),
            (false, true) => format!("{key}{}", self.path),
            (false, false) => format!("{key}.{}", self.path),
        };
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.msg)
    }
}

impl std::error::Error for DecodeError {}

impl de::Error for DecodeError {
    fn custom<M: fmt::Display>(msg: M) -> Self {
        DecodeError {
            path: String::new(),
            msg: msg.to_string(),
        }
    }
    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        Self::custom(format_args!("expected {exp}, got {unexp}"))
    }
    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        DecodeError {
            path: field.to_owned(),
            msg: format!("unknown key (known: {})", expected.join(", ")),
        }
    }
    fn missing_field(field: &'static str) -> Self {
        DecodeError {
            path: field.to_owned(),
            msg: "missing".to_owned(),
        }
    }
    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        Self::custom(format_args!(
            "{variant:?} is not one of {}",
            expected.join(", ")
        ))
    }
}

/// What D-Bus calls a value's type, for messages.
fn type_name(v: &Value<'_>) -> String {
    format!("a value of type {}", v.value_signature())
}

fn wrong(v: &Value<'_>, want: &str) -> DecodeError {
    de::Error::custom(format_args!("expected {want}, got {}", type_name(v)))
}

/// Unwrap a variant-in-variant (some clients box values twice).
fn inner<'a>(v: &'a Value<'a>) -> &'a Value<'a> {
    match v {
        Value::Value(b) => inner(b),
        other => other,
    }
}

fn integer(v: &Value<'_>) -> Option<i128> {
    Some(match inner(v) {
        Value::U8(n) => (*n).into(),
        Value::U16(n) => (*n).into(),
        Value::U32(n) => (*n).into(),
        Value::U64(n) => (*n).into(),
        Value::I16(n) => (*n).into(),
        Value::I32(n) => (*n).into(),
        Value::I64(n) => (*n).into(),
        _ => return None,
    })
}

/// Why `s` is refused, if it is longer than any podscope string may be.
fn too_long(s: &str) -> Option<String> {
    (s.len() > STRING_MAX).then(|| format!("a string of {} bytes, more than {STRING_MAX}", s.len()))
}

/// `s`, unless it is longer than any podscope string may be.
fn bounded(s: &str) -> Result<&str, DecodeError> {
    match too_long(s) {
        Some(why) => Err(de::Error::custom(why)),
        None => Ok(s),
    }
}

/// A plain string argument (not in a dictionary), copied only once it is
/// known to fit `STRING_MAX`; its own bound is checked with the rest.
pub fn owned_arg(field: &str, s: &str) -> Result<String, Error> {
    match too_long(s) {
        Some(why) => Err(Error::invalid(field, why)),
        None => Ok(s.to_owned()),
    }
}

/// One value.
struct ValueDe<'a>(&'a Value<'a>);

macro_rules! lenient_int {
    ($($method:ident),*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
            match integer(self.0) {
                Some(n) if n >= 0 => visitor.visit_u64(n as u64),
                Some(n) => visitor.visit_i64(n as i64),
                None => Err(wrong(self.0, "an integer")),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for ValueDe<'_> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let v = inner(self.0);
        if integer(v).is_some() {
            return self.deserialize_i64(visitor);
        }
        match v {
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::F64(f) => visitor.visit_f64(*f),
            Value::Str(s) => visitor.visit_str(bounded(s.as_str())?),
            Value::ObjectPath(p) => visitor.visit_str(bounded(p.as_str())?),
            Value::Array(a) => visitor.visit_seq(SeqDe::new(a.iter())),
            Value::Structure(s) => visitor.visit_seq(SeqDe::new(s.fields().iter())),
            Value::Dict(_) => self.deserialize_map(visitor),
            other => Err(wrong(other, "a plain D-Bus value")),
        }
    }

    lenient_int!(
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64
    );

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match inner(self.0) {
            Value::Bool(b) => visitor.visit_bool(*b),
            other => Err(wrong(other, "a boolean (b)")),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match inner(self.0) {
            Value::Str(s) => visitor.visit_str(bounded(s.as_str())?),
            other => Err(wrong(other, "a string (s)")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }

    /// Present means Some: an absent key never reaches here.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match inner(self.0) {
            Value::Array(a) => visitor.visit_seq(SeqDe::new(a.iter())),
            other => Err(wrong(other, "an array")),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match inner(self.0) {
            Value::Structure(s) => visitor.visit_seq(SeqDe::new(s.fields().iter())),
            other => Err(wrong(other, "a structure")),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match inner(self.0) {
            Value::Dict(d) => {
                let entries = d.iter().map(|(k, v)| (Key::Value(k), v)).collect();
                de::Deserializer::deserialize_any(MapDe { entries }, visitor)
            }
            other => Err(wrong(other, "a dictionary")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match inner(self.0) {
            Value::Dict(_) => self.deserialize_map(visitor),
            // A struct that travels as a D-Bus structure, like (sss).
            Value::Structure(s) => visitor.visit_seq(SeqDe::new(s.fields().iter())),
            other => Err(wrong(other, "a dictionary (a{sv})")),
        }
    }

    /// Enums travel as their lowercase name (`"ready"`, `"udp"`).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match inner(self.0) {
            Value::Str(s) => {
                let d: de::value::StrDeserializer<'_, DecodeError> = s.as_str().into_deserializer();
                visitor.visit_enum(d)
            }
            other => Err(wrong(other, "a string (s)")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        f32 f64 char bytes byte_buf unit unit_struct newtype_struct tuple_struct i128 u128
    }
}

enum Key<'a> {
    Str(&'a str),
    Value(&'a Value<'a>),
}

impl Key<'_> {
    fn text(&self) -> String {
        match self {
            Key::Str(s) => (*s).to_owned(),
            Key::Value(v) => match inner(v) {
                Value::Str(s) => s.to_string(),
                other => format!("{other:?}"),
            },
        }
    }
}

/// A dictionary's entries, walked sorted by key so that of several bad
/// keys the same one is always reported.
struct MapDe<'a> {
    entries: Vec<(Key<'a>, &'a Value<'a>)>,
}

impl<'de, 'a> de::Deserializer<'de> for MapDe<'a> {
    type Error = DecodeError;
    fn deserialize_any<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value, DecodeError> {
        // Keys are copied to be sorted and named in errors: bound first.
        for (k, _) in &self.entries {
            match k {
                Key::Str(s) => bounded(s)?,
                Key::Value(v) => match inner(v) {
                    Value::Str(s) => bounded(s.as_str())?,
                    _ => "",
                },
            };
        }
        self.entries.sort_by_cached_key(|(k, _)| k.text());
        self.entries.reverse();
        visitor.visit_map(MapAccess {
            entries: self.entries,
            current: String::new(),
        })
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

struct MapAccess<'a> {
    /// Reversed, so `pop` walks them in order.
    entries: Vec<(Key<'a>, &'a Value<'a>)>,
    current: String,
}

impl<'de> de::MapAccess<'de> for MapAccess<'_> {
    type Error = DecodeError;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        let Some((key, _)) = self.entries.last() else {
            return Ok(None);
        };
        self.current = key.text();
        let r = match key {
            Key::Str(s) => seed.deserialize(de::value::StrDeserializer::<DecodeError>::new(s)),
            Key::Value(v) => seed.deserialize(ValueDe(v)),
        };
        // An unknown key names itself; any other key error gets its name.
        r.map(Some).map_err(|mut e| {
            if e.path.is_empty() {
                e.path.clone_from(&self.current);
            }
            e
        })
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DecodeError> {
        let (_, v) = self.entries.pop().expect("a value follows its key");
        seed.deserialize(ValueDe(v))
            .map_err(|e| e.under(&self.current))
    }
}

struct SeqDe<'a, I: Iterator<Item = &'a Value<'a>>> {
    items: I,
    index: usize,
}

impl<'a, I: Iterator<Item = &'a Value<'a>>> SeqDe<'a, I> {
    fn new(items: I) -> Self {
        SeqDe { items, index: 0 }
    }
}

impl<'de, 'a, I: Iterator<Item = &'a Value<'a>>> de::SeqAccess<'de> for SeqDe<'a, I> {
    type Error = DecodeError;
    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        let Some(v) = self.items.next() else {
            return Ok(None);
        };
        let i = self.index;
        self.index += 1;
        seed.deserialize(ValueDe(v)).map(Some).map_err(|mut e| {
            e.path = if e.path.is_empty() {
                format!("[{i}]")
            } else if e.path.starts_with('[') {
                format!("[{i}]{}", e.path)
            } else {
                format!("[{i}].{}", e.path)
            };
            e
        })
    }
}

/// For integer fields where CRI's "none" is a negative number
/// (`cpu_quota: -1`): negative reads as 0.
pub fn negative_is_zero<'de, D: de::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an integer")
        }
        fn visit_u64<E>(self, n: u64) -> Result<u64, E> {
            Ok(n)
        }
        fn visit_i64<E>(self, n: i64) -> Result<u64, E> {
            Ok(n.max(0) as u64)
        }
    }
    d.deserialize_i64(V)
}

/// A typed dictionary as the `a{sv}` a peer receives (for verbose dumps
/// and for tests that take the raw view).
pub fn to_dict<T: serde::Serialize + zbus::zvariant::Type>(v: &T) -> Result<Dict, Error> {
    use zbus::zvariant::{serialized::Context, to_bytes, LE};
    let ctxt = Context::new_dbus(LE, 0);
    let fail = |e: zbus::zvariant::Error| Error::internal(format!("encode a dictionary: {e}"));
    let bytes = to_bytes(ctxt, v).map_err(fail)?;
    bytes.deserialize::<Dict>().map(|(d, _)| d).map_err(fail)
}

/// A D-Bus value as JSON (for CRI's `verbose` info maps).
pub fn json_of(v: &Value<'_>) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::U8(n) => J::from(*n),
        Value::Bool(b) => J::from(*b),
        Value::I16(n) => J::from(*n),
        Value::U16(n) => J::from(*n),
        Value::I32(n) => J::from(*n),
        Value::U32(n) => J::from(*n),
        Value::I64(n) => J::from(*n),
        Value::U64(n) => J::from(*n),
        Value::F64(n) => J::from(*n),
        Value::Str(s) => J::from(s.as_str()),
        Value::Signature(s) => J::from(s.to_string()),
        Value::ObjectPath(p) => J::from(p.as_str()),
        Value::Value(inner) => json_of(inner),
        Value::Array(a) => J::Array(a.iter().map(json_of).collect()),
        Value::Dict(d) => J::Object(
            d.iter()
                .map(|(k, v)| {
                    let key = match json_of(k) {
                        J::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, json_of(v))
                })
                .collect(),
        ),
        Value::Structure(s) => J::Array(s.fields().iter().map(json_of).collect()),
        #[allow(unreachable_patterns)]
        other => J::from(format!("{other:?}")),
    }
}

/// A dictionary as a JSON object text.
pub fn dict_json(d: &Dict) -> String {
    let obj: serde_json::Map<String, serde_json::Value> =
        d.iter().map(|(k, v)| (k.clone(), json_of(v))).collect();
    serde_json::Value::Object(obj).to_string()
}
