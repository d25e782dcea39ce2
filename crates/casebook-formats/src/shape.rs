//! A value's structure as bytes to hash: two values give the same bytes exactly when
//! `serde_json` writes them as the same text, but no string is escaped and no number formatted.
//! Strings are length-prefixed, integers kept by value, floats by their bits, structs written
//! as the maps `serde_json` makes of them. The bytes are for in-memory hashes only
//! ([`crate::ids::Hash64`]): they are never stored and name nothing.

use serde::ser::{self, Serialize};

/// A tag before each value, so that the encoding stays unambiguous.
mod tag {
    pub const NULL: u8 = 0;
    pub const FALSE: u8 = 1;
    pub const TRUE: u8 = 2;
    pub const INT: u8 = 3;
    /// An integer beyond `i128` (a `u128` above `i128::MAX`).
    pub const BIG: u8 = 4;
    pub const FLOAT: u8 = 5;
    pub const STRING: u8 = 6;
    pub const SEQ: u8 = 7;
    pub const MAP: u8 = 8;
    /// The end of a sequence or a map.
    pub const END: u8 = 9;
}

/// Writes `value`'s structure into `out` (cleared first).
pub fn write<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    out.clear();
    // Writing into a vector cannot fail; `Error` exists for `serde`'s custom errors.
    let _ = value.serialize(Shape(out));
}

/// Nothing goes wrong writing into a vector; this is for `serde`'s custom errors only.
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

struct Shape<'a>(&'a mut Vec<u8>);

impl Shape<'_> {
    fn string(self, text: &str) {
        self.0.push(tag::STRING);
        self.0.extend_from_slice(&(text.len() as u64).to_le_bytes());
        self.0.extend_from_slice(text.as_bytes());
    }

    fn int(self, value: i128) {
        self.0.push(tag::INT);
        self.0.extend_from_slice(&value.to_le_bytes());
    }

    /// A map of one entry, `{variant: …}`, as `serde_json` writes an enum variant with data.
    fn variant(&mut self, variant: &str) {
        self.0.push(tag::MAP);
        Shape(self.0).string(variant);
    }
}

/// Sequences, maps and structs, which all end with [`tag::END`]; `closes` more for the map
/// around an enum variant with data.
struct Compound<'a> {
    out: &'a mut Vec<u8>,
    closes: usize,
}

impl Compound<'_> {
    fn value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(Shape(self.out))
    }

    fn end(self) -> Result<(), Error> {
        for _ in 0..self.closes {
            self.out.push(tag::END);
        }
        Ok(())
    }
}

impl<'a> ser::Serializer for Shape<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.0.push(if v { tag::TRUE } else { tag::FALSE });
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }

    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }

    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }

    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }

    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.int(v);
        Ok(())
    }

    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }

    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }

    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }

    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.int(v.into());
        Ok(())
    }

    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        match i128::try_from(v) {
            Ok(v) => self.int(v),
            Err(_) => {
                self.0.push(tag::BIG);
                self.0.extend_from_slice(&v.to_le_bytes());
            }
        }
        Ok(())
    }

    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // `serde_json` writes an `f32` by its own shortest text: the same text as the `f64` it
        // widens to only when the two are the same number, which the bits of the `f64` tell.
        self.serialize_f64(f64::from(v))
    }

    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        if v.is_finite() {
            self.0.push(tag::FLOAT);
            self.0.extend_from_slice(&v.to_bits().to_le_bytes());
        } else {
            // `serde_json` writes infinities and NaN as `null`.
            self.0.push(tag::NULL);
        }
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.string(v.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.string(v);
        Ok(())
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        // `serde_json` writes bytes as an array of numbers.
        self.0.push(tag::SEQ);
        for b in v {
            Shape(self.0).int((*b).into());
        }
        self.0.push(tag::END);
        Ok(())
    }

    fn serialize_none(self) -> Result<(), Error> {
        self.0.push(tag::NULL);
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.0.push(tag::NULL);
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<(), Error> {
        self.string(variant);
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.variant(variant);
        value.serialize(Shape(self.0))?;
        self.0.push(tag::END);
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>, Error> {
        self.0.push(tag::SEQ);
        Ok(Compound { out: self.0, closes: 1 })
    }

    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Compound<'a>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Error> {
        self.variant(variant);
        self.0.push(tag::SEQ);
        Ok(Compound { out: self.0, closes: 2 })
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>, Error> {
        self.0.push(tag::MAP);
        Ok(Compound { out: self.0, closes: 1 })
    }

    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Compound<'a>, Error> {
        self.serialize_map(Some(len))
    }

    fn serialize_struct_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, Error> {
        self.variant(variant);
        self.0.push(tag::MAP);
        Ok(Compound { out: self.0, closes: 2 })
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.value(value)
    }

    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.value(value)
    }

    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.value(value)
    }

    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.value(value)
    }

    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.value(key)
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.value(value)
    }

    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        Shape(self.out).string(key);
        self.value(value)
    }

    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        Shape(self.out).string(key);
        self.value(value)
    }

    fn end(self) -> Result<(), Error> {
        Compound::end(self)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    /// Same bytes exactly when `serde_json` writes the same text, over values that come close.
    #[test]
    fn equal_exactly_when_the_json_text_is() {
        let values: Vec<Value> = vec![
            json!(null),
            json!(0),
            json!(-0.0),
            json!(0.0),
            json!(1),
            json!(1.0),
            json!(-1),
            json!(u64::MAX),
            json!(""),
            json!("1"),
            json!("a\"b"),
            json!("a\\\"b"),
            json!(["a", "b"]),
            json!(["ab"]),
            json!([["a"], "b"]),
            json!({"a": "b"}),
            json!({"b": "a"}),
            json!({"a": "b", "c": "d"}),
            json!({"c": "d", "a": "b"}),
            json!({"a": {"b": "c"}}),
            json!({"a": ["b", "c"]}),
            json!([{"a": "b"}, {}]),
            json!([{}, {"a": "b"}]),
            json!(true),
            json!("true"),
            json!([]),
            json!({}),
            json!([null]),
        ];
        let mut a = Vec::new();
        let mut b = Vec::new();
        for x in &values {
            for y in &values {
                super::write(x, &mut a);
                super::write(y, &mut b);
                let same_text = serde_json::to_string(x).unwrap() == serde_json::to_string(y).unwrap();
                assert_eq!(a == b, same_text, "{x} vs {y}");
            }
        }
    }

    /// A struct with optional fields skipped, as the rest of a case is: another field present
    /// is another shape.
    #[test]
    fn structs_are_the_maps_serde_json_writes() {
        #[derive(serde::Serialize)]
        struct Rest<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            name: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            description: Option<&'a str>,
        }
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        super::write(&Rest { name: Some("x"), description: None }, &mut a);
        super::write(&Rest { name: None, description: Some("x") }, &mut b);
        super::write(&json!({"name": "x"}), &mut c);
        assert_ne!(a, b);
        assert_eq!(a, c);
    }
}
