public import PushgateCore

/// The specification every ``PushStore`` backend must meet, as plain throwing checks: no test framework,
/// so the SQLite tests and the PostgreSQL tests run the same list unchanged, e.g.
///
/// ```swift
/// @Test(arguments: StoreConformance.allChecks)
/// func conformance(_ check: StoreCheck) async throws {
///     try await check.run { try makeStoreOnATemporaryFile() }
/// }
/// ```
///
/// Each check takes a fresh, empty store from the factory, passes time explicitly (never sleeps) and
/// throws a ``ConformanceFailure`` naming what differed.
public enum StoreConformance {
    public static let allChecks: [StoreCheck] =
        registryChecks + requestChecks + fanOutChecks + leaseChecks
        + retryChecks + reportChecks + instanceChecks + platformChecks + claimOnEnqueueChecks + idempotencyChecks
        + retentionChecks + batchChecks + webPushChecks + multiClaimChecks

    static let webPushChecks: [StoreCheck] = [
        StoreCheck(
            "subscriptionsRegisterAndReadBackAsWebPush",
            WebPushChecks.subscriptionsRegisterAndReadBackAsWebPush
        ),
        StoreCheck(
            "aNewSubscriptionOfTheSameEndpointReplacesTheDevicesKeys",
            WebPushChecks.aNewSubscriptionOfTheSameEndpointReplacesTheDevicesKeys
        ),
        StoreCheck(
            "aPrunedSubscriptionIsSkippedAndComesBackWhenTheBrowserSubscribesAgain",
            WebPushChecks.aPrunedSubscriptionIsSkippedAndComesBackWhenTheBrowserSubscribesAgain
        ),
        StoreCheck(
            "subscriptionsAreUnassignedAndRemovedByTheirEndpoint",
            WebPushChecks.subscriptionsAreUnassignedAndRemovedByTheirEndpoint
        ),
        StoreCheck(
            "webPushRetriesFailuresAndCountsKeepThePlatform",
            WebPushChecks.webPushRetriesFailuresAndCountsKeepThePlatform
        ),
        StoreCheck("theWebPushOverrideOfARequestReadsBack", WebPushChecks.theWebPushOverrideOfARequestReadsBack),
    ]

    static let multiClaimChecks: [StoreCheck] = [
        StoreCheck("manyOneDeviceRequestsInOneClaim", MultiClaimChecks.manyOneDeviceRequestsInOneClaim),
        StoreCheck("aChunkLargerThanAPageEndsTheClaim", MultiClaimChecks.aChunkLargerThanAPageEndsTheClaim),
        StoreCheck("nothingOfAnOverdueRequestIsClaimed", MultiClaimChecks.nothingOfAnOverdueRequestIsClaimed),
        StoreCheck(
            "aMultiClaimsLeasesEndAndAreTakenOverOnce",
            MultiClaimChecks.aMultiClaimsLeasesEndAndAreTakenOverOnce
        ),
        StoreCheck(
            "concurrentMultiClaimsNeverShareAChunk",
            MultiClaimChecks.concurrentMultiClaimsNeverShareAChunk
        ),
    ]

    static let batchChecks: [StoreCheck] = [
        StoreCheck("batchAnswersEachRequestAsAloneWould", BatchChecks.batchAnswersEachRequestAsAloneWould),
        StoreCheck("batchClaimsAtMostOneChunkPerNewRequest", BatchChecks.batchClaimsAtMostOneChunkPerNewRequest),
        StoreCheck("batchOfProgressChecksEachLease", BatchChecks.batchOfProgressChecksEachLease),
        StoreCheck(
            "batchOfProgressFinishesEachRequestAsAloneWould",
            BatchChecks.batchOfProgressFinishesEachRequestAsAloneWould
        ),
        StoreCheck(
            "writeOfRecordsAndRequestsAnswersEachAsAloneWould",
            BatchChecks.writeOfRecordsAndRequestsAnswersEachAsAloneWould
        ),
    ]

    static let retentionChecks: [StoreCheck] = [
        StoreCheck(
            "finishedRequestsAreDeletedAfterTheRetentionPeriod",
            RetentionChecks.finishedRequestsAreDeletedAfterTheRetentionPeriod
        ),
        StoreCheck("unfinishedRequestsAreNeverDeleted", RetentionChecks.unfinishedRequestsAreNeverDeleted),
        StoreCheck(
            "largeRequestsAreDeletedInBoundedTransactions",
            RetentionChecks.largeRequestsAreDeletedInBoundedTransactions
        ),
    ]

    static let idempotencyChecks: [StoreCheck] = [
        StoreCheck(
            "retryWithTheSameKeyAnswersTheStoredRequest",
            IdempotencyChecks.retryWithTheSameKeyAnswersTheStoredRequest
        ),
        StoreCheck("theKeyWithAnotherBodyIsRefused", IdempotencyChecks.theKeyWithAnotherBodyIsRefused),
        StoreCheck("idempotencyKeysArePerApp", IdempotencyChecks.keysArePerApp),
        StoreCheck(
            "theKeyAndFingerprintAreStoredWithTheRequest",
            IdempotencyChecks.theKeyAndFingerprintAreStoredWithTheRequest
        ),
        StoreCheck("theKeyIsFreeAfterItsWindow", IdempotencyChecks.theKeyIsFreeAfterItsWindow),
        StoreCheck("concurrentRequestsWithOneKeyStoreOne", IdempotencyChecks.concurrentRequestsWithOneKeyStoreOne),
    ]

    static let claimOnEnqueueChecks: [StoreCheck] = [
        StoreCheck(
            "claimWithEnqueueKeepsRequestOrder",
            ClaimOnEnqueueChecks.claimWithEnqueueKeepsRequestOrder
        ),
        StoreCheck(
            "claimWithEnqueueOfARefusedRequestClaimsNothing",
            ClaimOnEnqueueChecks.claimWithEnqueueOfARefusedRequestClaimsNothing
        ),
    ]

    static let platformChecks: [StoreCheck] = [
        StoreCheck("fcmDevicesRegisterAndReadBackAsFCM", PlatformChecks.fcmDevicesRegisterAndReadBackAsFCM),
        StoreCheck("sameTextOnBothPlatformsIsTwoDevices", PlatformChecks.sameTextOnBothPlatformsIsTwoDevices),
        StoreCheck(
            "invalidatingAnFCMDeviceSkipsItAndLeavesItsAPNsTwin",
            PlatformChecks.invalidatingAnFCMDeviceSkipsItAndLeavesItsAPNsTwin
        ),
        StoreCheck("mixedGroupFanOutReachesBothPlatforms", PlatformChecks.mixedGroupFanOutReachesBothPlatforms),
        StoreCheck("fcmRetriesAndFailuresKeepThePlatform", PlatformChecks.fcmRetriesAndFailuresKeepThePlatform),
        StoreCheck(
            "fcmOverrideAndFCMTokensOfARequestReadBack",
            PlatformChecks.fcmOverrideAndFCMTokensOfARequestReadBack
        ),
    ]

    static let instanceChecks: [StoreCheck] = [
        StoreCheck("aLiveInstanceIDIsRefusedToAnotherProcess", InstanceChecks.aLiveInstanceIDIsRefusedToAnotherProcess),
        StoreCheck(
            "aStaleInstanceIDIsTakenOverAndTheOldHolderCannotRenew",
            InstanceChecks.aStaleInstanceIDIsTakenOverAndTheOldHolderCannotRenew
        ),
        StoreCheck("aReleasedInstanceIDIsFreeAtOnce", InstanceChecks.aReleasedInstanceIDIsFreeAtOnce),
    ]

    static let registryChecks: [StoreCheck] = [
        StoreCheck("registeringCreatesAValidDevice", RegistryChecks.registeringCreatesAValidDevice),
        StoreCheck("registeringTwiceIsIdempotent", RegistryChecks.registeringTwiceIsIdempotent),
        StoreCheck("registeringInAnotherGroupJoinsIt", RegistryChecks.registeringInAnotherGroupJoinsIt),
        StoreCheck("appsAreSeparateNamespaces", RegistryChecks.appsAreSeparateNamespaces),
        StoreCheck("batchRegistrationReportsEachRegistration", RegistryChecks.batchRegistrationReportsEachRegistration),
        StoreCheck("invalidBatchWritesNothing", RegistryChecks.invalidBatchWritesNothing),
        StoreCheck("unassignLeavesOtherGroups", RegistryChecks.unassignLeavesOtherGroups),
        StoreCheck("removingADeviceRemovesItEverywhere", RegistryChecks.removingADeviceRemovesItEverywhere),
        StoreCheck("lookingUpAnUnknownDeviceFindsNothing", RegistryChecks.lookingUpAnUnknownDeviceFindsNothing),
        StoreCheck("pagedGroupListingIsStableAcrossPages", RegistryChecks.pagedGroupListingIsStableAcrossPages),
        StoreCheck("listingAnUnknownGroupFails", RegistryChecks.listingAnUnknownGroupFails),
        StoreCheck(
            "badDeviceTokenInvalidatesWithoutTimestamp",
            RegistryChecks.badDeviceTokenInvalidatesWithoutTimestamp
        ),
        StoreCheck(
            "reRegistrationAfterAppleTimestampSurvives410",
            RegistryChecks.reRegistrationAfterAppleTimestampSurvives410
        ),
        StoreCheck(
            "registrationBeforeAppleTimestampIsInvalidatedBy410",
            RegistryChecks.registrationBeforeAppleTimestampIsInvalidatedBy410
        ),
        StoreCheck(
            "reRegisteringAnInvalidDeviceRevalidatesIt",
            RegistryChecks.reRegisteringAnInvalidDeviceRevalidatesIt
        ),
        StoreCheck(
            "invalidatingAnUnknownDeviceChangesNothing",
            RegistryChecks.invalidatingAnUnknownDeviceChangesNothing
        ),
    ]

    static let requestChecks: [StoreCheck] = [
        StoreCheck("enqueueCountsDistinctTargets", RequestChecks.enqueueCountsDistinctTargets),
        StoreCheck("unknownGroupsTargetNothingAndAreReported", RequestChecks.unknownGroupsTargetNothingAndAreReported),
        StoreCheck(
            "requestWhoseGroupsAreAllUnknownIsRejected",
            RequestChecks.requestWhoseGroupsAreAllUnknownIsRejected
        ),
        StoreCheck("requestWithoutTargetsIsRejected", RequestChecks.requestWithoutTargetsIsRejected),
        StoreCheck("duplicateRequestIDIsRejected", RequestChecks.duplicateRequestIDIsRejected),
        StoreCheck("storedRequestReadsBackUnchanged", RequestChecks.storedRequestReadsBackUnchanged),
        StoreCheck("requestWithNoValidTargetIsDoneAtOnce", RequestChecks.requestWithNoValidTargetIsDoneAtOnce),
        StoreCheck("requestsTakeTurnsByChunkOldestFirst", RequestChecks.requestsTakeTurnsByChunkOldestFirst),
        StoreCheck(
            "aOneChunkRequestPassesABroadcastsRemainingChunks",
            SchedulingChecks.aOneChunkRequestPassesABroadcastsRemainingChunks
        ),
        StoreCheck("urgentRequestsOfAnAppAreCutFirst", SchedulingChecks.urgentRequestsOfAnAppAreCutFirst),
        StoreCheck("appsTakeTurns", SchedulingChecks.appsTakeTurns),
    ]

    static let fanOutChecks: [StoreCheck] = [
        StoreCheck("fanOutDedupesAcrossGroups", FanOutChecks.fanOutDedupesAcrossGroups),
        StoreCheck("fanOutSkipsInvalidDevices", FanOutChecks.fanOutSkipsInvalidDevices),
        StoreCheck("fanOutSendsToUnregisteredDirectTokens", FanOutChecks.fanOutSendsToUnregisteredDirectTokens),
        StoreCheck(
            "devicesRegisteredAfterEnqueueAreNotTargeted",
            FanOutChecks.devicesRegisteredAfterEnqueueAreNotTargeted
        ),
        StoreCheck(
            "devicesLeavingAGroupBeforeFanOutAreSkipped",
            FanOutChecks.devicesLeavingAGroupBeforeFanOutAreSkipped
        ),
        StoreCheck("targetPagesRespectTheLimitAndTheChunk", FanOutChecks.targetPagesRespectTheLimitAndTheChunk),
        StoreCheck("fanOutStreamsLargeGroupInPages", FanOutChecks.fanOutStreamsLargeGroupInPages),
        StoreCheck("skippedTargetsCountOnceAcrossATakeover", SkipChecks.skippedTargetsCountOnceAcrossATakeover),
        StoreCheck(
            "directTokensInvalidatedAfterEnqueueAreSkipped",
            SkipChecks.directTokensInvalidatedAfterEnqueueAreSkipped
        ),
        StoreCheck("expiryCountsUnreadTargetsAsExpired", SkipChecks.expiryCountsUnreadTargetsAsExpired),
        StoreCheck("reportIsSplitByService", ServiceSplitChecks.reportIsSplitByService),
        StoreCheck("expiredTargetsFailByService", ServiceSplitChecks.expiredTargetsFailByService),
        StoreCheck("changesAfterThePageReadAreNotSkips", SkipChecks.changesAfterThePageReadAreNotSkips),
    ]

    static let leaseChecks: [StoreCheck] = [
        StoreCheck("chunksAreLeasedToOneOwnerAtATime", LeaseChecks.chunksAreLeasedToOneOwnerAtATime),
        StoreCheck("expiredLeaseIsTakenOver", LeaseChecks.expiredLeaseIsTakenOver),
        StoreCheck("progressWithLostLeaseIsRefused", LeaseChecks.progressWithLostLeaseIsRefused),
        StoreCheck("progressRenewsTheLease", LeaseChecks.progressRenewsTheLease),
        StoreCheck("progressNeverMovesBack", LeaseChecks.progressNeverMovesBack),
        StoreCheck(
            "restartedInstanceReclaimsItsOwnChunksAtOnce",
            LeaseChecks.restartedInstanceReclaimsItsOwnChunksAtOnce
        ),
        StoreCheck("nothingAcceptedIsLostWhenAnInstanceDies", LeaseChecks.nothingAcceptedIsLostWhenAnInstanceDies),
        StoreCheck("concurrentInstancesNeverShareAChunk", LeaseChecks.concurrentInstancesNeverShareAChunk),
    ]

    static let retryChecks: [StoreCheck] = [
        StoreCheck("dueRetriesAreClaimedWithLeases", RetryChecks.dueRetriesAreClaimedWithLeases),
        StoreCheck("retryOutcomeWithLostLeaseIsRefused", RetryChecks.retryOutcomeWithLostLeaseIsRefused),
        StoreCheck("rescheduledRetryWaitsForItsNextAttempt", RetryChecks.rescheduledRetryWaitsForItsNextAttempt),
        StoreCheck("releasedRetryLeasesAreClaimableAtOnce", RetryChecks.releasedRetryLeasesAreClaimableAtOnce),
        StoreCheck("retryClaimsRespectTheLimitEarliestFirst", RetryChecks.retryClaimsRespectTheLimitEarliestFirst),
        StoreCheck(
            "requestIsDoneWhenAllChunksAndRetriesAreDone",
            RetryChecks.requestIsDoneWhenAllChunksAndRetriesAreDone
        ),
        StoreCheck(
            "expiredRequestRecordsPendingRetriesAsFailed",
            RetryChecks.expiredRequestRecordsPendingRetriesAsFailed
        ),
        StoreCheck(
            "expiredRequestCountsUnsentTargetsAndClosesItsChunks",
            RetryChecks.expiredRequestCountsUnsentTargetsAndClosesItsChunks
        ),
        StoreCheck("requestsWithoutExpirationTimeNeverExpire", RetryChecks.requestsWithoutExpirationTimeNeverExpire),
        StoreCheck("nextWakeUpIsTheEarliestPendingWork", RetryChecks.nextWakeUpIsTheEarliestPendingWork),
    ]

    static let reportChecks: [StoreCheck] = [
        StoreCheck("reportCountsByReason", ReportChecks.reportCountsByReason),
        StoreCheck(
            "invalidationsWithProgressApplyToTheRegistry",
            ReportChecks.invalidationsWithProgressApplyToTheRegistry
        ),
        StoreCheck("failuresAreListedByTokenInPages", ReportChecks.failuresAreListedByTokenInPages),
        StoreCheck("reportOfAnUnknownRequestIsNil", ReportChecks.reportOfAnUnknownRequestIsNil),
        StoreCheck("reportsOfManyAreEachAsAlone", ReportChecks.reportsOfManyAreEachAsAlone),
    ]
}

/// Makes a fresh, empty store.
public typealias StoreFactory = @Sendable () async throws -> any PushStore

/// One named check of the specification.
public struct StoreCheck: Sendable, CustomStringConvertible {
    public let name: String
    private let body: @Sendable (any PushStore) async throws -> Void

    init(_ name: String, _ body: @escaping @Sendable (any PushStore) async throws -> Void) {
        self.name = name
        self.body = body
    }

    /// Runs the check against a fresh store from `makeStore`.
    public func run(using makeStore: StoreFactory) async throws {
        try await body(try await makeStore())
    }

    public var description: String { name }
}

/// A store that does not meet the specification: where and what.
public struct ConformanceFailure: Error, CustomStringConvertible {
    public let file: String
    public let line: Int
    public let message: String

    public init(file: String, line: Int, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String { "\(file):\(line): \(message)" }
}
