//! A TCP relay on loopback that counts the bytes its target sends back: put in front of
//! ChromeDriver, it shows what crosses the WebDriver connection (a large body read out
//! of the page must not).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::TestSupportError;

/// A relay from a loopback port to `target`, counting the bytes `target` sends back.
/// Stopped when dropped.
#[derive(Debug)]
pub struct CountingRelay {
    address: SocketAddr,
    from_target: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for CountingRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CountingRelay {
    /// Starts relaying connections made to [`CountingRelay::url`] to `target`.
    pub async fn start(target: SocketAddr) -> Result<Self, TestSupportError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| TestSupportError::Front(format!("cannot bind 127.0.0.1:0: {e}")))?;
        let address = listener
            .local_addr()
            .map_err(|e| TestSupportError::Front(e.to_string()))?;
        let from_target = Arc::new(AtomicU64::new(0));
        let counted = from_target.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let counted = counted.clone();
                tokio::spawn(async move {
                    let Ok(upstream) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (client_in, client_out) = client.into_split();
                    let (upstream_in, upstream_out) = upstream.into_split();
                    let ahead = tokio::spawn(pipe(client_in, upstream_out, None));
                    pipe(upstream_in, client_out, Some(counted)).await;
                    ahead.abort();
                });
            }
        });
        Ok(CountingRelay {
            address,
            from_target,
            task,
        })
    }

    /// The relay's `http://` URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The bytes the target has sent back so far, over every connection.
    pub fn bytes_from_target(&self) -> u64 {
        self.from_target.load(Ordering::SeqCst)
    }
}

/// Copies `from` into `to` until either ends, adding what crossed to `count`.
async fn pipe(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    count: Option<Arc<AtomicU64>>,
) {
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        let read = match tokio::io::AsyncReadExt::read(&mut from, &mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(count) = &count {
            count.fetch_add(read as u64, Ordering::SeqCst);
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
