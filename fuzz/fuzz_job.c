/* fuzz_job.c - libFuzzer target for the job table a rank unpacks from
 * rank 0's broadcast (tpl__job_unpack).  It aborts when an invariant
 * breaks: an accepted table's source table places every tensor's bytes
 * inside one of its files, its derived sizes add up, and it packs and
 * unpacks again to the same tensors and files. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_sources(const struct tpl__job *job) {
  uint64_t total = 0;
  for (size_t i = 0; i < job->ntensors; i++) {
    const struct tpl__job_tensor *t = &job->tensors[i];
    total += t->stored_bytes;
    if (job->nfiles == 0) continue;
    if (t->file >= job->nfiles) abort();
    if (t->file_offset > job->files[t->file].size ||
        t->stored_bytes > job->files[t->file].size - t->file_offset)
      abort();
  }
  if (total != job->source_bytes) abort();
}

static void check_repack(const struct tpl__job *job) {
  uint8_t *buf = NULL;
  size_t len = 0;
  struct tpl__job *again = NULL;
  if (tpl__job_pack(job, &buf, &len) != 0) abort();
  if (tpl__job_unpack(buf, len, &again, NULL) != 0) abort();
  if (again->ntensors != job->ntensors || again->nfiles != job->nfiles ||
      again->store_size != job->store_size)
    abort();
  for (size_t f = 0; f < job->nfiles; f++)
    if (strcmp(again->files[f].path, job->files[f].path) != 0) abort();
  tpl__job_free(again);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct tpl__job *job = NULL;
  struct tpl__error err = {0};
  if (tpl__job_unpack(data, size, &job, &err) != 0) {
    if (job != NULL || err.msg[0] == '\0') abort();
    return 0;
  }
  check_sources(job);
  check_repack(job);
  tpl__job_free(job);
  return 0;
}
