import HummingbirdCore
import Logging
import NIOCore
import NIOSSL

/// HummingbirdTLS's `TLSChannel`, but with the context read per connection: that one is fixed when the
/// server is built, so a renewed certificate would need a restart. This reads the current context of a
/// ``ReloadableTLSContext`` as each connection is set up, and then hands the channel to the HTTP/1.1
/// channel as `TLSChannel` does.
struct ReloadableTLSChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let tls: ReloadableTLSContext

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let context = tls.context
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
        }
        .flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
