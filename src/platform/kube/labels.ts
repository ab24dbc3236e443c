/** Labels and annotations the kube platform puts on what it creates. */
export const LABEL_FUNCTION = 'sless.dev/function';
export const LABEL_FUNCTION_NAMESPACE = 'sless.dev/function-namespace';
export const LABEL_BUILD_KEY = 'sless.dev/build-key';
/** On builds: the dependency key of the tree built (see core/dependency-key.ts). */
export const LABEL_DEPENDENCY_KEY = 'sless.dev/dependency-key';
/** In an image's config labels: the dependency key its dependency layer was installed for. */
export const IMAGE_LABEL_DEPENDENCY_KEY = 'dev.sless.dependency-key';
/** On a build made by the controller from an earlier image: the image it started from. */
export const ANNOTATION_BASE_IMAGE = 'sless.dev/base-image';
export const LABEL_TRIGGER = 'sless.dev/trigger';
export const LABEL_JOB = 'sless.dev/functionjob';
export const LABEL_COMPONENT = 'app.kubernetes.io/component';
export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const ANNOTATION_REVISION = 'sless.dev/revision';
export const ANNOTATION_DIGEST = 'sless.dev/digest';
/**
 * When the controller read the pushed digest, in milliseconds: a Job's completionTime has whole seconds,
 * and two builds of one function finishing in the same second must still be told apart by age.
 */
export const ANNOTATION_BUILT_AT = 'sless.dev/built-at';
export const ANNOTATION_IMAGE = 'sless.dev/image';
export const ANNOTATION_COMMIT_FULL = 'sless.dev/commit';
export const MANAGED_BY = 'sless';
export const FUNCTION_PORT = 8080;
/** On a canary Deployment and its pods: the function whose new revision it runs beside the old. */
export const LABEL_CANARY_OF = 'sless.dev/canary-of';
/** On a canary Deployment: the percent of requests its revision takes. */
export const ANNOTATION_CANARY_WEIGHT = 'sless.dev/canary-weight';
/** On a canary Deployment: when that share was set (ms since the epoch), so answers count per share. */
export const ANNOTATION_CANARY_SINCE = 'sless.dev/canary-since';
/**
 * On a commit revision's Deployment, Service and pods (commit-manifests.ts): the function whose kept
 * build at a commit it runs. Its pods carry it instead of the function label.
 */
export const LABEL_COMMIT_OF = 'sless.dev/commit-of';
/** Beside LABEL_COMMIT_OF: the full commit that revision was built at. */
export const LABEL_AT_COMMIT = 'sless.dev/at-commit';
/** When some replica of sless last served a request for the function (ISO time), on its Deployment. */
export const ANNOTATION_LAST_REQUEST = 'sless.dev/last-request';
