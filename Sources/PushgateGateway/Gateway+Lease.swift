import APNsHTTP2
import PushgateDispatch

extension Gateway.Configuration {
    /// A lease must outlast the longest wait for an answer (an app's request timeout): otherwise work
    /// still in flight could be claimed by another instance and sent twice.
    func checkLease() throws(Gateway.StartupError) {
        let lease = dispatcher.leaseDuration
        for app in apps where app.legacy == nil {
            let timeout = Duration.nanoseconds(app.client.requestTimeout.nanoseconds)
            guard lease >= timeout else {
                throw Gateway.StartupError(
                    description: "lease: \(lease) is shorter than app \(app.name)'s request timeout (\(timeout)); "
                        + "a lease must outlast the longest wait for an answer"
                )
            }
        }
    }
}
