package jobsapi

import (
	"net/http"

	"github.com/usherhq/usher/jobtype"
)

// The periodic jobs of /v1/cron (docs/api.md, "Periodic jobs").

func (a *api) createCron(w http.ResponseWriter, r *http.Request) error {
	var spec jobtype.CronSpec
	if err := decode(r, &spec); err != nil {
		return err
	}
	c, err := a.Engine.CreateCron(r.Context(), spec)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, c)
}

func (a *api) listCrons(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, jobtype.CronList{Crons: a.Engine.Crons()})
}

func (a *api) getCron(w http.ResponseWriter, r *http.Request) error {
	c, err := a.Engine.Cron(r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, c)
}

func (a *api) updateCron(w http.ResponseWriter, r *http.Request) error {
	var u jobtype.CronUpdate
	if err := decode(r, &u); err != nil {
		return err
	}
	c, err := a.Engine.UpdateCron(r.Context(), r.PathValue("name"), u)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, c)
}

func (a *api) deleteCron(w http.ResponseWriter, r *http.Request) error {
	if err := a.Engine.DeleteCron(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
