//! Resource quantities as Kubernetes writes them: `100m`, `2`, `1.5Gi`,
//! `2k`, `1e3`.
//!
//! Why it exists: scenarios compute with CPU and memory amounts (cgroup
//! values from requests and limits, a node's memory for oom_score_adj, a
//! pod's allocated resources, a node's allocatable count) and compare what
//! the API server reports, which may spell one amount in several ways
//! (`1k`, `1000`, `1e3`, `1000000m`). Parsing the whole grammar once, here,
//! into an exact value keeps every such step exact and rejects, with the
//! grammar in the message, what the API server would reject.
//!
//! The grammar (apimachinery's `resource.Quantity`):
//!
//! ```text
//! quantity        ::= signedNumber suffix
//! signedNumber    ::= number | ("+" | "-") number
//! number          ::= digits | digits "." digits | digits "." | "." digits
//! suffix          ::= binarySI | decimalSI | decimalExponent
//! binarySI        ::= Ki | Mi | Gi | Ti | Pi | Ei
//! decimalSI       ::= n | u | m | "" | k | M | G | T | P | E
//! decimalExponent ::= ("e" | "E") signedInteger
//! ```
use std::cmp::Ordering;

/// The grammar, for error messages.
const GRAMMAR: &str = "an optional sign, digits with an optional decimal point, then \
                       Ki Mi Gi Ti Pi Ei, n u m k M G T P E, nothing, or e/E and a signed \
                       integer (100m, 2, 1.5Gi, 2k, 1e3)";

/// An exact amount: `digits × 10^exponent`, normalised (no trailing zero
/// in `digits`; zero is `0 × 10^0`), so equal amounts are equal values
/// however they were written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quantity {
    digits: i128,
    exponent: i32,
}

/// Why a text is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a quantity: {reason}; a quantity is {grammar}", grammar = GRAMMAR)]
pub struct QuantityError {
    pub input: String,
    pub reason: Reason,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    #[error("it has no digits")]
    NoDigits,
    #[error("{0:?} is no suffix")]
    Suffix(String),
    #[error("the exponent {0:?} is not a signed integer")]
    Exponent(String),
    #[error("it has more digits than 38 or is too large to compute with")]
    TooLarge,
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

/// A decimal SI suffix's power of ten.
fn decimal_suffix(s: &str) -> Option<i32> {
    Some(match s {
        "n" => -9,
        "u" => -6,
        "m" => -3,
        "" => 0,
        "k" => 3,
        "M" => 6,
        "G" => 9,
        "T" => 12,
        "P" => 15,
        "E" => 18,
        _ => return None,
    })
}

/// A binary SI suffix's power of two.
fn binary_suffix(s: &str) -> Option<u32> {
    Some(match s {
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        "Ti" => 40,
        "Pi" => 50,
        "Ei" => 60,
        _ => return None,
    })
}

/// `10^n` when it fits.
fn ten_to(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

impl Quantity {
    pub const ZERO: Quantity = Quantity {
        digits: 0,
        exponent: 0,
    };

    /// Parses `s` by the whole grammar; nothing around it (no spaces).
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        let fail = |reason| QuantityError {
            input: s.to_owned(),
            reason,
        };
        let (negative, rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let whole_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (whole, rest) = rest.split_at(whole_len);
        let (fraction, suffix) = match rest.strip_prefix('.') {
            Some(r) => r.split_at(r.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", rest),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(fail(Reason::NoDigits));
        }
        // Power of ten from the suffix, and the power of two of a binary one.
        let (mut exponent, binary) = if let Some(e) = decimal_suffix(suffix) {
            (e, 0)
        } else if let Some(b) = binary_suffix(suffix) {
            (0, b)
        } else if let Some(e) = suffix.strip_prefix(['e', 'E']).filter(|e| !e.is_empty()) {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(fail(Reason::Exponent(e.to_owned())));
            }
            let e: i32 = e
                .parse()
                .map_err(|_| fail(Reason::Exponent(e.to_owned())))?;
            (e, 0)
        } else {
            return Err(fail(Reason::Suffix(suffix.to_owned())));
        };
        let significant = format!("{whole}{fraction}");
        let significant = significant.trim_start_matches('0');
        let mut digits: i128 = if significant.is_empty() {
            0
        } else {
            significant.parse().map_err(|_| fail(Reason::TooLarge))?
        };
        let fraction_len = i32::try_from(fraction.len()).map_err(|_| fail(Reason::TooLarge))?;
        exponent = exponent
            .checked_sub(fraction_len)
            .ok_or_else(|| fail(Reason::TooLarge))?;
        if binary > 0 {
            digits = digits
                .checked_mul(1i128 << binary)
                .ok_or_else(|| fail(Reason::TooLarge))?;
        }
        if negative {
            digits = -digits;
        }
        Ok(Quantity::normalised(digits, exponent))
    }

    fn normalised(mut digits: i128, mut exponent: i32) -> Quantity {
        if digits == 0 {
            return Quantity::ZERO;
        }
        while digits % 10 == 0 && exponent < i32::MAX {
            digits /= 10;
            exponent += 1;
        }
        Quantity { digits, exponent }
    }

    pub fn is_zero(self) -> bool {
        self.digits == 0
    }

    /// `ceil(self × 10^scale)`, or `None` when it does not fit an `i128`.
    /// Kubernetes' `Value` is scale 0, `MilliValue` scale 3: both round up.
    pub fn scaled_ceil(self, scale: i32) -> Option<i128> {
        let power = i64::from(self.exponent) + i64::from(scale);
        if power >= 0 {
            return self.digits.checked_mul(ten_to(u32::try_from(power).ok()?)?);
        }
        let Some(divisor) = u32::try_from(-power).ok().and_then(ten_to) else {
            // Smaller than 1 in magnitude: ceil is 1 above zero, 0 below.
            return Some(i128::from(self.digits > 0));
        };
        let (q, r) = (self.digits / divisor, self.digits % divisor);
        Some(if r > 0 { q + 1 } else { q })
    }

    /// The amount rounded up to a whole number of its unit (bytes, cores),
    /// as Kubernetes' `Value`.
    pub fn value(self) -> Option<i128> {
        self.scaled_ceil(0)
    }

    /// The amount in thousandths of its unit rounded up (millicores), as
    /// Kubernetes' `MilliValue`.
    pub fn milli(self) -> Option<i128> {
        self.scaled_ceil(3)
    }
}

impl From<i64> for Quantity {
    /// A whole number of the unit.
    fn from(n: i64) -> Quantity {
        Quantity::normalised(i128::from(n), 0)
    }
}

/// [`Quantity::value`] of a text.
pub fn value(s: &str) -> Result<i128, QuantityError> {
    let q = Quantity::parse(s)?;
    q.value().ok_or_else(|| QuantityError {
        input: s.to_owned(),
        reason: Reason::TooLarge,
    })
}

/// [`Quantity::milli`] of a text.
pub fn milli(s: &str) -> Result<i128, QuantityError> {
    let q = Quantity::parse(s)?;
    q.milli().ok_or_else(|| QuantityError {
        input: s.to_owned(),
        reason: Reason::TooLarge,
    })
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        let sign = |d: i128| d.signum();
        if sign(self.digits) != sign(other.digits) || self.digits == 0 {
            return sign(self.digits).cmp(&sign(other.digits));
        }
        // Same sign, both non-zero: bring the larger exponent down to the
        // smaller one; if that overflows, its magnitude is the larger.
        let (a, ea, b, eb, flipped) = if self.exponent >= other.exponent {
            (
                self.digits,
                self.exponent,
                other.digits,
                other.exponent,
                false,
            )
        } else {
            (
                other.digits,
                other.exponent,
                self.digits,
                self.exponent,
                true,
            )
        };
        let shift = u32::try_from(i64::from(ea) - i64::from(eb)).ok();
        let order = match shift.and_then(ten_to).and_then(|p| a.checked_mul(p)) {
            Some(a) => a.cmp(&b),
            // |a × 10^shift| is beyond any i128, so beyond |b|.
            None => {
                if a > 0 {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
        };
        if flipped { order.reverse() } else { order }
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Display for Quantity {
    /// The exact amount: `1500m` as `1.5`, `1Ki` as `1024`, `1e30` as `1e30`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Quantity { digits, exponent } = *self;
        if (0..=6).contains(&exponent) {
            return write!(
                f,
                "{digits}{}",
                "0".repeat(exponent.unsigned_abs() as usize)
            );
        }
        if exponent > 0 {
            return write!(f, "{digits}e{exponent}");
        }
        let text = digits.unsigned_abs().to_string();
        let places = exponent.unsigned_abs() as usize;
        let sign = if digits < 0 { "-" } else { "" };
        if places > 30 {
            return write!(f, "{digits}e{exponent}");
        }
        let padded = format!("{text:0>width$}", width = places + 1);
        let (int, frac) = padded.split_at(padded.len() - places);
        write!(f, "{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `digits × 10^exponent` as a parse gives it.
    fn exact(digits: i128, exponent: i32) -> Quantity {
        Quantity::normalised(digits, exponent)
    }

    #[test]
    fn plain_and_signed_numbers() {
        assert_eq!(q("2"), exact(2, 0));
        assert_eq!(q("+2"), exact(2, 0));
        assert_eq!(q("-2"), exact(-2, 0));
        assert_eq!(q("0"), Quantity::ZERO);
        assert_eq!(q("-0"), Quantity::ZERO);
        assert_eq!(q("007"), exact(7, 0));
        assert_eq!(q("2.5"), exact(25, -1));
        assert_eq!(q("2."), exact(2, 0));
        assert_eq!(q(".5"), exact(5, -1));
        assert_eq!(q("-.5"), exact(-5, -1));
        assert_eq!(q("1.500"), exact(15, -1));
    }

    #[test]
    fn every_decimal_suffix() {
        for (suffix, power) in [
            ("n", -9),
            ("u", -6),
            ("m", -3),
            ("", 0),
            ("k", 3),
            ("M", 6),
            ("G", 9),
            ("T", 12),
            ("P", 15),
            ("E", 18),
        ] {
            assert_eq!(q(&format!("3{suffix}")), exact(3, power), "3{suffix}");
        }
        assert_eq!(q("100m"), exact(1, -1));
        assert_eq!(q("1.5k"), exact(15, 2));
    }

    #[test]
    fn every_binary_suffix() {
        for (suffix, power) in [
            ("Ki", 10),
            ("Mi", 20),
            ("Gi", 30),
            ("Ti", 40),
            ("Pi", 50),
            ("Ei", 60),
        ] {
            assert_eq!(q(&format!("3{suffix}")), exact(3 << power, 0), "3{suffix}");
        }
        assert_eq!(q("1.5Ki"), exact(1536, 0));
        assert_eq!(q("0.5Mi").value(), Some(1 << 19));
        assert_eq!(q("-1Gi"), exact(-(1 << 30), 0));
    }

    #[test]
    fn decimal_exponents() {
        assert_eq!(q("1e3"), exact(1, 3));
        assert_eq!(q("1E3"), exact(1, 3));
        assert_eq!(q("1e+3"), exact(1, 3));
        assert_eq!(q("1e-3"), exact(1, -3));
        assert_eq!(q("2.5e2"), exact(25, 1));
        assert_eq!(q("1e0"), exact(1, 0));
        // `E` alone is exa, not an exponent.
        assert_eq!(q("1E"), exact(1, 18));
        assert_eq!(q("1e30"), exact(1, 30));
    }

    #[test]
    fn one_amount_written_many_ways_is_one_value() {
        let thousand = [
            "1k",
            "1000",
            "1e3",
            "1E3",
            "1000000m",
            "1000000000u",
            "1.0k",
            "+1k",
        ];
        for s in thousand {
            assert_eq!(q(s), q("1000"), "{s}");
        }
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("500m"), q("0.5"));
        assert_eq!(q("2k"), Quantity::from(2000));
        assert_eq!(q("0k"), Quantity::from(0));
    }

    #[test]
    fn quantities_are_ordered_exactly() {
        assert!(q("100m") < q("1"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("-1") < q("1n"));
        assert!(q("-2") < q("-1"));
        assert!(q("1e30") > q("1Ei"));
        assert!(q("-1e30") < q("-1Ei"));
        assert!(q("1n") > Quantity::ZERO);
        assert_eq!(q("1.0").cmp(&q("1000m")), Ordering::Equal);
    }

    #[test]
    fn values_round_up_as_kubernetes() {
        assert_eq!(q("100m").milli(), Some(100));
        assert_eq!(q("2").milli(), Some(2000));
        assert_eq!(q("2.5").milli(), Some(2500));
        assert_eq!(q("0.1m").milli(), Some(1));
        assert_eq!(q("1n").milli(), Some(1));
        assert_eq!(q("-1n").milli(), Some(0));
        assert_eq!(q("1Gi").milli(), Some(1000 << 30));
        assert_eq!(q("5096Mi").value(), Some(5096 << 20));
        assert_eq!(q("1.5").value(), Some(2));
        assert_eq!(q("-1.5").value(), Some(-1));
        assert_eq!(q("1e-40").value(), Some(1));
        assert_eq!(q("1e40").value(), None);
        assert_eq!(milli("1500m"), Ok(1500));
        assert_eq!(value("2k"), Ok(2000));
        assert_eq!(value("1e40").unwrap_err().reason, Reason::TooLarge);
    }

    #[test]
    fn malformed_quantities_are_rejected_with_the_reason() {
        let cases = [
            ("", Reason::NoDigits),
            ("+", Reason::NoDigits),
            ("-", Reason::NoDigits),
            (".", Reason::NoDigits),
            ("-.", Reason::NoDigits),
            ("Gi", Reason::NoDigits),
            (" 1", Reason::NoDigits),
            ("--1", Reason::NoDigits),
            ("1 Gi", Reason::Suffix(" Gi".into())),
            ("1 ", Reason::Suffix(" ".into())),
            ("1Gb", Reason::Suffix("Gb".into())),
            ("1K", Reason::Suffix("K".into())),
            ("1KI", Reason::Suffix("KI".into())),
            ("1i", Reason::Suffix("i".into())),
            ("1.2.3", Reason::Suffix(".3".into())),
            ("0x10", Reason::Suffix("x10".into())),
            ("1mm", Reason::Suffix("mm".into())),
            ("1e", Reason::Suffix("e".into())),
            ("1e+", Reason::Exponent("+".into())),
            ("1e1.5", Reason::Exponent("1.5".into())),
            ("1ek", Reason::Exponent("k".into())),
            ("1e99999999999", Reason::Exponent("99999999999".into())),
            ("1234567890123456789012345678901234567890", Reason::TooLarge),
            ("1000000000000000000000000000000Ei", Reason::TooLarge),
        ];
        for (input, reason) in cases {
            let e = Quantity::parse(input).expect_err(input);
            assert_eq!(e.reason, reason, "{input:?}");
            let message = e.to_string();
            assert!(
                message.contains(&format!("{input:?} is not a quantity")),
                "{message}"
            );
            assert!(message.contains("Ki Mi Gi Ti Pi Ei"), "{message}");
        }
    }

    #[test]
    fn the_exact_amount_displays() {
        for (s, shown) in [
            ("1500m", "1.5"),
            ("1Ki", "1024"),
            ("-5m", "-0.005"),
            ("1e30", "1e30"),
            ("0", "0"),
            ("12k", "12000"),
            ("1e-40", "1e-40"),
        ] {
            assert_eq!(q(s).to_string(), shown, "{s}");
        }
    }
}

/// Generated quantities: whatever a feature file or the API server writes
/// is parsed or refused naming it, and what is parsed keeps its exact
/// amount. `PROPTEST_CASES` raises the bounded count (`make props-long`).
#[cfg(test)]
mod props {
    use super::*;
    use crate::props::text;
    use proptest::prelude::*;

    const PIECES: &[&str] = &[
        "0",
        "1",
        "9",
        "12345678901234567890",
        ".",
        "+",
        "-",
        "e",
        "E",
        "Ki",
        "Gi",
        "Ei",
        "m",
        "k",
        "n",
        "E",
        "e-",
        "e+",
        "2147483647",
        "2147483648",
        " ",
    ];

    fn quantity() -> impl Strategy<Value = Quantity> {
        (any::<i64>(), -40i32..40).prop_map(|(d, e)| Quantity::normalised(d.into(), e))
    }

    proptest! {
        #![proptest_config(ProptestConfig::default())]

        /// Any text: a quantity, or a refusal quoting the text.
        #[test]
        fn any_text_parses_or_is_named(s in text(PIECES, 12)) {
            match Quantity::parse(&s) {
                Ok(q) => {
                    // Whatever parsed can be computed with or says why not.
                    let _ = (q.value(), q.milli(), q.to_string());
                }
                Err(e) => {
                    prop_assert_eq!(&e.input, &s);
                    let quoted = format!("{s:?} is not a quantity: ");
                    prop_assert!(e.to_string().starts_with(&quoted), "{}", e);
                }
            }
        }

        /// A quantity displayed and parsed again is the same amount.
        #[test]
        fn display_round_trips(q in quantity()) {
            prop_assert_eq!(Quantity::parse(&q.to_string()), Ok(q));
        }

        /// One amount in several spellings is one value, and its order is
        /// the numbers'.
        #[test]
        fn spellings_agree_and_order_is_numeric(a in any::<i64>(), b in any::<i64>()) {
            let q = |s: String| Quantity::parse(&s).map_err(|e| TestCaseError::fail(e.to_string()));
            let plain = q(a.to_string())?;
            prop_assert_eq!(q(format!("{a}000m"))?, plain);
            prop_assert_eq!(q(format!("{a}e0"))?, plain);
            prop_assert_eq!(q(format!("{a}000e-3"))?, plain);
            prop_assert_eq!(plain.value(), Some(i128::from(a)));
            prop_assert_eq!(q(format!("{a}k"))?.value(), Some(i128::from(a) * 1000));
            prop_assert_eq!(q(format!("{a}Ki"))?.value(), Some(i128::from(a) * 1024));
            prop_assert_eq!(plain.cmp(&q(format!("{b}"))?), a.cmp(&b));
        }
    }
}
