//! Bugs planted in a driver on purpose (`deployment.faults`), so that the
//! conformance pack can be seen failing a driver that has them: mutation
//! testing of the pack (docs/driver-mutants.md keeps the catalogue of
//! mutants, which scenarios must catch each, and how each is realised).
//!
//! A fault is planted by one of two hands. The suite's own driver plants
//! any that a driver could do to itself; the interposer, between the
//! kubelet and any other driver, plants those that show in the driver's
//! answers (it cannot make a driver write a file or publish a slice). A
//! driver's own code broken the way a vendor's bug would be is the third
//! way, outside the runner: upstream's test driver built from a patch
//! (`hack/mutants/test-driver/`).

/// Who plants a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Planter {
    /// The suite's own driver breaks itself.
    Builtin,
    /// The interposer alters what passes between the kubelet and the
    /// driver (the run needs `--interpose`).
    Interposer,
}

macro_rules! faults {
    ($($(#[doc = $doc:literal])* $variant:ident ($($planter:ident),+);)+) => {
        /// A bug planted in the driver under test.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Fault {
            $($(#[doc = $doc])* $variant,)+
        }

        impl Fault {
            pub const ALL: &'static [Fault] = &[$(Fault::$variant,)+];

            /// The name a profile uses.
            pub fn name(self) -> &'static str {
                match self {
                    $(Fault::$variant => stringify!($variant),)+
                }
            }

            /// Who can plant it.
            pub fn planters(self) -> &'static [Planter] {
                match self {
                    $(Fault::$variant => &[$(Planter::$planter),+],)+
                }
            }

            /// What the broken driver does, in a sentence.
            pub fn description(self) -> &'static str {
                match self {
                    $(Fault::$variant => concat!($($doc),+).trim_ascii(),)+
                }
            }
        }
    };
}

faults! {
    /// Every NodePrepareResources call fails.
    FailPrepare(Builtin, Interposer);
    /// Every NodeUnprepareResources call fails: the driver never unprepares.
    FailUnprepare(Builtin, Interposer);
    /// The driver publishes no devices.
    NoDevices(Builtin);
    /// Only the first claim of a NodePrepareResources call is prepared; the
    /// others are answered with success and no devices.
    FirstClaimOnly(Builtin, Interposer);
    /// Of a request's devices only the first is prepared and answered.
    FirstDeviceOnly(Builtin, Interposer);
    /// Of a claim's requests only the first is prepared and answered.
    FirstRequestOnly(Builtin, Interposer);
    /// Every claim of a call is answered with the first claim's devices.
    OtherClaimsDevices(Builtin, Interposer);
    /// Answers name another device than the one allocated.
    WrongDeviceAnswered(Builtin, Interposer);
    /// The CDI device IDs answered name no device of the CDI specs written.
    CdiNameMismatch(Builtin, Interposer);
    /// NodePrepareResources succeeds with no devices at all.
    NoDevicesAnswered(Builtin, Interposer);
    /// Devices are answered but no CDI spec is written.
    NoCdiSpec(Builtin);
    /// The CDI spec is written where the container runtime does not look.
    CdiSpecElsewhere(Builtin);
    /// Unprepare never removes the claim's CDI spec.
    CdiSpecKept(Builtin);
    /// Unprepare removes the CDI spec but keeps the claim, so a later
    /// prepare of it answers from memory and writes no spec.
    CheckpointKeepsClaim(Builtin);
    /// Every claim's variables go into the CDI spec of each, so a container
    /// gets those of claims it does not use.
    SharedSpecEdits(Builtin);
    /// A device once prepared and unprepared is refused ever after.
    DeviceBrokenAfterUse(Builtin);
    /// An admin-access claim is refused as if its device were taken.
    RefusesAdminAccess(Builtin);
    /// The driver registers with the kubelet before it serves DRA calls:
    /// its first seconds' calls fail.
    ServesLate(Builtin);
    /// ResourceSlices name another node than the driver's own.
    SlicesWrongNode(Builtin);
    /// Unprepare of a claim the driver does not know fails (it must
    /// succeed: the kubelet repeats unprepare).
    UnprepareUnknownFails(Interposer);
    /// A second NodePrepareResources of a prepared claim fails.
    PrepareRepeatFails(Interposer);
    /// A second NodePrepareResources of a prepared claim names other CDI
    /// devices.
    PrepareRepeatOtherDevices(Interposer);
    /// A repeated NodePrepareResources is answered from a record without
    /// writing the CDI spec again (which a reboot removed).
    ReplayPrepared(Interposer);
    /// NodeUnprepareResources succeeds without doing anything.
    SwallowUnprepare(Interposer);
}

impl Fault {
    pub fn planted_by(self, planter: Planter) -> bool {
        self.planters().contains(&planter)
    }

    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.iter().copied().find(|f| f.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_fault_says_what_it_does() {
        let mut names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Fault::ALL.len());
        for f in Fault::ALL {
            assert!(f.description().ends_with('.'), "{f:?}");
            assert!(!f.planters().is_empty());
            assert_eq!(Fault::from_name(f.name()), Some(*f));
        }
    }
}
