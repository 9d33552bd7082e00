//! Mentions that are no use: super::p::P, [`crate::d::p::P`].
// super::p::P
/* crate::d::p::P /* nested: super::p */ still a comment: super::p::P */

pub struct S;

pub fn names<'a>(s: &'a str) -> (&'a str, char, &'static str, &'static str) {
    let quote = '"';
    (s, quote, "super::p::P \" super::p::P", r#"crate::d::p::P "quoted" super::p"#)
}

#[cfg(test)]
fn probe() -> super::p::P {
    todo!()
}

#[cfg(test)]
mod tests {
    use super::super::p::P;

    #[test]
    fn sees_p() {
        let _ = std::mem::size_of::<P>();
    }
}
