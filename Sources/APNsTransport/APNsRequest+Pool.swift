public import PushTransport
public import PushgateCore

extension APNsRequest: TransportSubmission {
    public func fail(_ failure: PushTransportFailure) {
        receiver.receive(.failed(failure), for: self)
    }
}

extension TransportPooledRequest where Submission == APNsRequest {
    @inlinable
    public func complete(_ outcome: APNsOutcome) {
        request.receiver.receive(outcome, for: request)
    }
}
