/* scenario.c: see scenario.h. */
#include "scenario.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "models.h"
#include "testutil.h"

int sc_scenario(const char *script, const char *prefix, const char *name, char *dir, size_t n, char **out) {
    snprintf(dir, n, "%s/%s-%s", th_tmpdir(), prefix, name);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "timeout 600 bash %s %s %s", script, name, dir);
    int rc = th_run(cmd, out);
    if (!*out) *out = calloc(1, 1);
    return rc;
}

const char *sc_no_slurm(void) {
#ifndef NVCNN_MPI
    return "no MPI in this build";
#else
    if (th_run("command -v sbatch && command -v srun && command -v slurmctld && command -v slurmd && command -v munged",
               NULL) != 0)
        return "no Slurm: scripts/install-deps.sh installs slurmctld, slurmd, slurm-client and munge";
    if (geteuid() != 0) return "slurmd must run as root";
    return NULL;
#endif
}

char *sc_slurp(const char *dir, const char *name) {
    char p[1400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *t = (char *)tu_read_file(p, NULL);
    return t ? t : calloc(1, 1);
}

int sc_job_is(const char *out, const char *name, const char *state, const char *code, int restarts) {
    char key[64], want[160];
    snprintf(key, sizeof key, "job %s: ", name);
    const char *l = strstr(out, key);
    if (!l) return 0;
    size_t len = strcspn(l, "\n");
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
    snprintf(want, sizeof want, "JobState=%s ", state);
    if (!strstr(line, want)) return 0;
    snprintf(want, sizeof want, "ExitCode=%s ", code);
    if (!strstr(line, want)) return 0;
    snprintf(want, sizeof want, "Restarts=%d ", restarts);
    return strstr(line, want) != NULL;
}

int sc_count(const char *t, const char *s) {
    int k = 0;
    for (const char *p = strstr(t, s); p; p = strstr(p + 1, s)) k++;
    return k;
}

int sc_step_rows(const char *t, long *steps, char (*loss)[16], int max) {
    int n = 0;
    for (const char *l = t; *l; l += strcspn(l, "\n"), l += *l == '\n') {
        long step, epoch;
        double a, b, c;
        char tail, lo[16];
        if (*l == ' ' && sscanf(l, "%ld %ld %lf %15s %lf%c", &step, &epoch, &a, lo, &c, &tail) == 6 && tail == '\n' &&
            sscanf(lo, "%lf", &b) == 1 && n < max) {
            if (loss) snprintf(loss[n], 16, "%s", lo);
            steps[n++] = step;
        }
    }
    return n;
}

long sc_last_number_after(const char *t, const char *prefix) {
    long v = -1;
    for (const char *p = strstr(t, prefix); p; p = strstr(p + 1, prefix)) v = atol(p + strlen(prefix));
    return v;
}

int sc_load_lenet(const char *path, uint64_t seed, Net **net, float **velocity, CkptMeta *m) {
    char err[1024] = "";
    *net = model_build_net(model_find("lenet"), 2, 10);
    net_finalize(*net, seed);
    *velocity = xcalloc((*net)->params_total, sizeof(float));
    int rc = ckpt_load(path, "lenet", *net, *velocity, m, err, sizeof err);
    if (rc) printf("    %s: %s\n", path, err);
    return rc;
}

