//! CEL validation rules (`x-kubernetes-validations`) attached to the generated schema.
//!
//! The rules are data: each struct that carries rules lists them in a `&[CelRule]` table and
//! attaches the table with `#[schemars(transform = ...)]`; tests walk the same tables. Also here:
//! [`reflow_docs`], which unwraps doc-comment line breaks in schema descriptions.

use schemars::Schema;
use serde_json::{Map, Value, json};

/// One `x-kubernetes-validations` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CelRule {
    /// The CEL expression; `self` is the object the rule is attached to.
    pub rule: &'static str,
    /// What the user sees when the rule fails: what is wrong and how to fix it.
    pub message: &'static str,
    /// The field the error is reported on, relative to the object (e.g. `.cpu.pinning`).
    pub field_path: Option<&'static str>,
    /// Reason `FieldValueRequired` ("set this field") instead of the default `FieldValueInvalid`.
    pub required: bool,
}

impl CelRule {
    /// The rule as the API server's `ValidationRule` JSON.
    pub fn to_json(&self) -> Value {
        let mut v = Map::new();
        v.insert("rule".into(), json!(self.rule));
        v.insert("message".into(), json!(self.message));
        if let Some(path) = self.field_path {
            v.insert("fieldPath".into(), json!(path));
        }
        if self.required {
            v.insert("reason".into(), json!("FieldValueRequired"));
        }
        Value::Object(v)
    }
}

/// Appends `rules` to the schema's `x-kubernetes-validations`.
pub(crate) fn attach(schema: &mut Schema, rules: &[CelRule]) {
    let entry = schema.ensure_object().entry("x-kubernetes-validations").or_insert_with(|| json!([]));
    if let Value::Array(list) = entry {
        list.extend(rules.iter().map(CelRule::to_json));
    }
}

/// Joins the hard-wrapped lines of doc comments in the descriptions of a struct and of its
/// fields, keeping blank-line paragraph breaks, so `kubectl explain` can wrap the text itself.
pub(crate) fn reflow_docs(schema: &mut Schema) {
    fn reflow(node: &mut Map<String, Value>) {
        if let Some(Value::String(text)) = node.get_mut("description") {
            *text = text
                .split("\n\n")
                .map(|para| para.lines().map(str::trim).collect::<Vec<_>>().join(" "))
                .collect::<Vec<_>>()
                .join("\n\n");
        }
    }
    let obj = schema.ensure_object();
    reflow(obj);
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        props.values_mut().filter_map(Value::as_object_mut).for_each(reflow);
    }
}
