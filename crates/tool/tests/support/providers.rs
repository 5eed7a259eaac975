//! The providers the turn-rule tests call: real Prometheus over the `Main` and `Vida`
//! fixtures, the Clinic front before the first and the Manus front (target `vida`)
//! before the second, each with the credentials given.

use base64::Engine as _;
use evidence_test_support as test_support;
use secrecy::SecretString;

/// Real Prometheus behind the Clinic and Manus fronts.
pub struct Providers {
    _main: test_support::Prometheus,
    _vida: test_support::Prometheus,
    pub clinic_front: test_support::ClinicFront,
    pub manus_front: test_support::ManusFront,
    manus_user: String,
    manus_password: String,
}

impl Providers {
    /// Starts both Prometheus servers and both fronts: Clinic accepting `clinic_token`,
    /// Manus the reader `manus_user` with `manus_password`.
    pub async fn start(clinic_token: &str, manus_user: &str, manus_password: &str) -> Providers {
        let main = test_support::Prometheus::start(test_support::Fixture::Main)
            .await
            .unwrap();
        let vida = test_support::Prometheus::start(test_support::Fixture::Vida)
            .await
            .unwrap();
        let clinic_front = test_support::ClinicFront::start(
            &main.url(),
            SecretString::from(clinic_token.to_owned()),
        )
        .await
        .unwrap();
        let manus_front = test_support::ManusFront::start(
            "vida",
            &vida.url(),
            SecretString::from(manus_user.to_owned()),
            SecretString::from(manus_password.to_owned()),
        )
        .await
        .unwrap();
        Providers {
            _main: main,
            _vida: vida,
            clinic_front,
            manus_front,
            manus_user: manus_user.to_owned(),
            manus_password: manus_password.to_owned(),
        }
    }

    /// What the Manus tool needs besides the runtime's variables: the `vida` target,
    /// the reader's credentials and a reference key ring.
    pub fn manus_vars(&self) -> [(&'static str, String); 4] {
        [
            ("MANUS_VIDA_URL", self.manus_front.base_url()),
            ("MANUS_USERNAME", self.manus_user.clone()),
            ("MANUS_PASSWORD", self.manus_password.clone()),
            (
                "MANUS_REF_KEYS",
                format!(
                    "k1:{}",
                    base64::engine::general_purpose::STANDARD.encode([7u8; 32])
                ),
            ),
        ]
    }
}

/// Real Prometheus over the `Main` fixture behind the Clinic front accepting
/// `clinic_token`: the provider of the Clinic server tests.
pub struct ClinicProvider {
    _prometheus: test_support::Prometheus,
    pub front: test_support::ClinicFront,
}

impl ClinicProvider {
    /// Starts both.
    pub async fn start(clinic_token: &str) -> ClinicProvider {
        let prometheus = test_support::Prometheus::start(test_support::Fixture::Main)
            .await
            .unwrap();
        let front = test_support::ClinicFront::start(
            &prometheus.url(),
            SecretString::from(clinic_token.to_owned()),
        )
        .await
        .unwrap();
        ClinicProvider {
            _prometheus: prometheus,
            front,
        }
    }
}
