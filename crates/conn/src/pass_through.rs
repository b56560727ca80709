//! The one way a byte-stream wrapper hands reads or writes on to the stream
//! it wraps, untouched. Wrappers that change only one direction (the
//! `:authority` rewriters), or add only a side effect on drop (counted
//! connections), say so in one line instead of restating `poll_*`.
//!
//! `pass_through_read!([generics] Type, field)` implements `AsyncRead`,
//! `pass_through_write!` `AsyncWrite` (vectored writes included), and
//! `pass_through_io!` both. The field must be `Unpin`.

#[macro_export]
macro_rules! pass_through_read {
    ([$($generics:tt)*] $ty:ty, $field:ident) => {
        impl<$($generics)*> ::tokio::io::AsyncRead for $ty {
            fn poll_read(
                mut self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &mut ::tokio::io::ReadBuf<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::tokio::io::AsyncRead::poll_read(::std::pin::Pin::new(&mut self.$field), cx, buf)
            }
        }
    };
}

#[macro_export]
macro_rules! pass_through_write {
    ([$($generics:tt)*] $ty:ty, $field:ident) => {
        impl<$($generics)*> ::tokio::io::AsyncWrite for $ty {
            fn poll_write(
                mut self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                buf: &[u8],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                ::tokio::io::AsyncWrite::poll_write(::std::pin::Pin::new(&mut self.$field), cx, buf)
            }

            fn poll_flush(
                mut self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::tokio::io::AsyncWrite::poll_flush(::std::pin::Pin::new(&mut self.$field), cx)
            }

            fn poll_shutdown(
                mut self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<::std::io::Result<()>> {
                ::tokio::io::AsyncWrite::poll_shutdown(::std::pin::Pin::new(&mut self.$field), cx)
            }

            fn poll_write_vectored(
                mut self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
                bufs: &[::std::io::IoSlice<'_>],
            ) -> ::std::task::Poll<::std::io::Result<usize>> {
                ::tokio::io::AsyncWrite::poll_write_vectored(::std::pin::Pin::new(&mut self.$field), cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                ::tokio::io::AsyncWrite::is_write_vectored(&self.$field)
            }
        }
    };
}

#[macro_export]
macro_rules! pass_through_io {
    ([$($generics:tt)*] $ty:ty, $field:ident) => {
        $crate::pass_through_read!([$($generics)*] $ty, $field);
        $crate::pass_through_write!([$($generics)*] $ty, $field);
    };
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    struct Wrapped {
        inner: tokio::io::DuplexStream,
    }

    crate::pass_through_io!([] Wrapped, inner);

    struct Generic<S> {
        io: S,
    }

    crate::pass_through_read!([S: tokio::io::AsyncRead + Unpin] Generic<S>, io);

    #[tokio::test]
    async fn bytes_pass_both_ways_untouched() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut w = Wrapped { inner: a };
        w.write_all(b"ping").await.unwrap();
        w.flush().await.unwrap();
        let mut got = [0u8; 4];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        b.write_all(b"pong").await.unwrap();
        drop(b);
        let mut back = Vec::new();
        w.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"pong");

        let mut g = Generic {
            io: &b"generic"[..],
        };
        let mut text = String::new();
        g.read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "generic");
    }
}
