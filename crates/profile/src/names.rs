//! Name rules the API server would enforce later, checked up front so that
//! a typo in a profile is not discovered by a scenario failing minutes in.

/// Why `name` is not a DNS subdomain (RFC 1123) of at most `max`
/// characters, the rule for DRA driver names (63) and object names (253).
pub(crate) fn dns_subdomain_problem(name: &str, max: usize) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if name.len() > max {
        return Some(format!(
            "is {} characters long, at most {max} are allowed",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.'))
    {
        let hint = if c.is_ascii_uppercase() {
            " (use lower case)"
        } else {
            ""
        };
        return Some(format!(
            "contains `{c}`: only lower-case letters, digits, `-` and `.` are allowed{hint}"
        ));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Some("has an empty part between dots".to_owned());
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(format!(
                "has the part `{label}`, which starts or ends with `-`"
            ));
        }
    }
    None
}

/// Whether `name` can be an environment variable a shell can name.
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The candidate closest to `word` (ignoring case), if any is close enough
/// to be what was meant: a third of its letters wrong at most.
pub(crate) fn closest<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    candidates
        .into_iter()
        .map(|c| (distance(word, c), c))
        .filter(|(d, c)| *d <= (c.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_subdomains() {
        assert_eq!(dns_subdomain_problem("gpu.example.com", 63), None);
        assert_eq!(dns_subdomain_problem("a-1.b", 63), None);
        assert_eq!(
            dns_subdomain_problem("GPU.example.com", 63).unwrap(),
            "contains `G`: only lower-case letters, digits, `-` and `.` are allowed (use lower case)"
        );
        assert_eq!(
            dns_subdomain_problem("gpu..com", 63).unwrap(),
            "has an empty part between dots"
        );
        assert_eq!(
            dns_subdomain_problem("-gpu.com", 63).unwrap(),
            "has the part `-gpu`, which starts or ends with `-`"
        );
        assert_eq!(
            dns_subdomain_problem(&"a".repeat(64), 63).unwrap(),
            "is 64 characters long, at most 63 are allowed"
        );
        assert!(dns_subdomain_problem("", 63).is_some());
    }

    #[test]
    fn closest_names() {
        let known = ["driverName", "deviceClass", "deployment"];
        assert_eq!(closest("drivername", known), Some("driverName"));
        assert_eq!(closest("devicClass", known), Some("deviceClass"));
        assert_eq!(closest("colour", known), None);
        assert!(is_env_name("PLUGIN_DIR") && !is_env_name("1X") && !is_env_name("A-B"));
    }
}
